"""Fused training kernels a plan asks for (``setting.kernels``), applied to the loaded model before peft wraps it.

``liger``: Liger Kernel (Hsu et al. 2024, https://github.com/linkedin/Liger-Kernel), through its own entry point
for a model instance, ``liger_kernel.transformers.monkey_patch._apply_liger_kernel_to_instance`` (which calls
the model type's ``apply_liger_kernel_to_<type>(model=...)``): the RMSNorm and SwiGLU MLP forwards of the
instance's modules, the instance's causal-LM forward with the fused linear cross-entropy (never materialises the
full logits), and the RoPE function of the model's transformers module (a module-level patch: it holds for every
model of that type in this process). Triton GPU kernels: the CPU is refused before the
model loads (:func:`check_kernels_runnable`, the rule :func:`autotune.schemas.setting.kernels_run_error`).
"""

from __future__ import annotations

from typing import Any

import torch

from autotune.errors import ConfigError
from autotune.schemas.setting import TrainingSetting, kernels_installed, kernels_run_error

LIGER_OPTIONS: dict[str, bool] = {
    "rope": True,
    "rms_norm": True,
    "swiglu": True,
    "cross_entropy": False,
    "fused_linear_cross_entropy": True,
}
"""What ``kernels: liger`` turns on (the keyword arguments of Liger's ``apply_liger_kernel_to_<type>``; the plain
cross-entropy is off because the fused linear one replaces it)."""


def check_kernels_runnable(setting: TrainingSetting, *, cpu: bool) -> None:
    """Refuse planned kernels that cannot run here, before anything is written.

    ``cpu``: ``--cpu`` was given; a machine where torch sees no CUDA/ROCm device counts as the CPU too.

    Raises:
        ConfigError: one line from :func:`kernels_run_error`.
    """
    if setting.kernels == "none":
        return
    error = kernels_run_error(
        setting.kernels,
        setting.loss_impl,
        cpu=cpu or not torch.cuda.is_available(),
        installed=kernels_installed(setting.kernels),
    )
    if error:
        raise ConfigError(error)


def liger_supports(model_type: str) -> bool:
    """True when Liger Kernel has an ``apply_liger_kernel_to_<type>`` for ``model_type`` (its own table)."""
    from liger_kernel.transformers.monkey_patch import MODEL_TYPE_TO_APPLY_LIGER_FN

    return model_type in MODEL_TYPE_TO_APPLY_LIGER_FN


def apply_kernels(model: Any, setting: TrainingSetting) -> None:
    """Patch ``model`` (a transformers causal LM, before peft) with the plan's fused kernels; nothing for ``none``.

    Raises:
        ConfigError: Liger Kernel has no patch for this model type (its own entry point would silently do nothing,
            and the run would not be what was planned).
    """
    if setting.kernels == "none":
        return
    from liger_kernel.transformers.monkey_patch import _apply_liger_kernel_to_instance

    model_type = str(getattr(model.config, "model_type", ""))
    if not liger_supports(model_type):
        raise ConfigError(
            f"kernels=liger: Liger Kernel has no kernels for model type {model_type!r}: plan kernels none"
        )
    _apply_liger_kernel_to_instance(model=model, **LIGER_OPTIONS)
