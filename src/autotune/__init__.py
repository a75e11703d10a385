"""autotune: plan and launch LLM fine-tuning on the GPUs you have.

The planning side (``autotune.schemas``, ``autotune.profiles``, ``autotune.costmodel``,
``autotune.planner``, ``autotune.launcher``) is pure Python and never imports torch; the
training core lives in ``autotune.trainer`` and is the only package that imports the
training stack (torch, transformers, peft, bitsandbytes, accelerate, deepspeed, datasets).
"""

__version__ = "0.1.0"
