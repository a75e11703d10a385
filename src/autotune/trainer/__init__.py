"""The shared training core (``python -m autotune.trainer``): runs exactly the setting of a plan.

It runs with transformers' Trainer, peft, bitsandbytes, accelerate / DeepSpeed. The only package that imports torch &
co.

Modules:
  in_backward    the optimizer stepped inside the backward (per-parameter hooks behind a no-op Trainer optimizer)
  fp8            FP8 linear layers through accelerate's torchao path (CUDA with FP8 tensor cores only)
  rounding       bf16 stochastic rounding: torchao's AdamW handed to the Trainer (and to the optimizer in backward)
  activation_offload  each decoder layer's saved tensors on the host (saved-tensor hooks around the layers)
  __main__       entry point: parse the arguments, run, user errors → one line and exit code 2
  args           TrainerArgs and its argparse parser, generated from schemas.trainer_options
  train          wires plan → data → model → Trainer → checkpoints, weights, report (seeds first)
  data           dataset loading, format detection, tokenization (Dataset.map), truncation, the collators
  export         ``python -m autotune.trainer.export``: a run's adapter, or the base with it merged, and the tokenizer
                 (what ``autotune export`` runs)
  lengths        ``python -m autotune.trainer.lengths``: each example's token count as the core tokenizes it
                 (what ``plan --dataset`` reads, in a subprocess)
  packed         blocks of whole examples and the packed collator (attention kept inside each example)
  model          tokenizer / model loading, precision, LoRA / QLoRA
  kernels        fused kernels a plan asks for (Liger Kernel), applied before peft
  hf_args        TrainingArguments from the plan (FSDP, DeepSpeed, compile, checkpointing)
  optim          optimizer choice
  chunked_loss   the chunked cross-entropy Trainer
  callbacks      metrics, progress, stop-on-signal, stop on a NaN/inf loss
  profiling      ``--profile-steps``: torch.profiler over a few steps, a trace and an ops table per rank
  guard          checks that what runs is what was planned
  memory         peak memory measurement
  report         the run report (schemas.run_report)
  checkpoints    checkpoint manifests: publish a finished save, resume from the newest intact one
  staged_save    the Trainer mixin that writes a checkpoint under a temporary name, then publishes it
  resume_load    the Trainer mixin that reloads a checkpoint's adapters in the plan's dtype
  token_count    the Trainer mixin that counts a packed batch's tokens without its padding (tokens/s)
  consistency    the plan agrees with the loaded model and with the plan a checkpoint was trained with
  data_checks    dataset rows checked against their format before tokenizing
  distributed_run  torchrun / accelerate launch wrappers: a failed worker ends in one line

This ``__init__`` stays light: importing ``autotune.trainer`` does not import torch.
"""
