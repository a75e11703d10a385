"""FP8 linear layers (``fp8``): torchao float8 training of the decoder's linears, converted through accelerate.

``accelerate.utils.ao.convert_model_to_fp8_ao`` (accelerate 1.15, the function its ``AORecipeKwargs`` /
``mixed_precision="fp8"`` torchao backend calls) swaps every ``nn.Linear`` whose dimensions are multiples of 16 for
torchao's ``Float8Linear`` (``torchao.float8.convert_to_float8_training``: dynamic tensorwise scaling, the matmuls in
``torch._scaled_mm``), keeping the model's first and last linear in bf16 for stability (``filter_linear_layers``).
The core calls it directly because the Trainer builds its own ``Accelerator`` without a way to pass the recipe. Under
LoRA it runs before peft, so the frozen base linears compute in FP8 and the adapters in bf16. Refused where it cannot
run (:func:`autotune.schemas.setting.fp8_run_error`: the CPU, or no torchao).
"""

from __future__ import annotations

from typing import Any

import torch

from autotune.errors import ConfigError
from autotune.schemas.setting import TrainingSetting, fp8_installed, fp8_run_error


def check_fp8_runnable(setting: TrainingSetting, *, cpu: bool) -> None:
    """Refuse planned FP8 linears that cannot run here, before anything is written.

    ``cpu``: ``--cpu`` was given; a machine where torch sees no CUDA device counts as the CPU too.

    Raises:
        ConfigError: one line from :func:`fp8_run_error`.
    """
    error = fp8_run_error(setting.fp8, cpu=cpu or not torch.cuda.is_available(), installed=fp8_installed())
    if error:
        raise ConfigError(error)


def apply_fp8(model: Any, setting: TrainingSetting) -> None:
    """Convert ``model``'s linears to torchao ``Float8Linear`` in place (module docstring); nothing without ``fp8``."""
    if not setting.fp8:
        return
    from accelerate.utils.ao import convert_model_to_fp8_ao

    convert_model_to_fp8_ao(model)
