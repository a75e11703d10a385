"""The shared training core, ``python -m autotune.trainer``: runs exactly the setting a plan records.

It is the only package that imports the training stack (torch, transformers, peft, bitsandbytes,
accelerate, deepspeed, datasets). Modules, one concept each: ``args`` (command line → plain values),
``model`` (weights, LoRA / QLoRA), ``data`` (datasets → token blocks), ``hf_args`` (TrainingArguments),
``optim`` (optimizer and schedule names), ``callbacks`` (progress, signals, timing), ``memory`` (peak
memory), ``guard`` (what runs is what was planned), ``chunked_loss`` (lm_head + cross-entropy in chunks),
``report`` (``run_report.json``), ``train`` (wires them together).
This ``__init__`` stays light: importing ``autotune.trainer`` does not import torch.
"""
