"""Reload a checkpoint's adapters as the plan made them: a resumed run continues the uninterrupted one.

A mixin over transformers' ``Trainer`` (5.x). ``Trainer._load_from_checkpoint`` reloads a peft model's adapters with
``model.load_adapter(checkpoint, adapter, is_trainable=True)``, i.e. with peft's default
``autocast_adapter_dtype=True``: bf16 adapters (the plan's ``adapter_dtype: compute`` under pure bf16) come back as
fp32, and every step after the resume differs from the run that was never stopped (and holds more memory). This
mixin loads them with the switch the adapters were created with (:func:`autotune.trainer.model.autocast_adapter_dtype`)
and leaves every other case (full weights, DeepSpeed, FSDP, several adapters) to the Trainer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from transformers.utils import ADAPTER_SAFE_WEIGHTS_NAME, ADAPTER_WEIGHTS_NAME

from autotune.schemas.plan import PlanFile
from autotune.trainer.model import autocast_adapter_dtype


class PlanDtypeResumeMixin:
    """Put before a ``Trainer`` class: ``class T(PlanDtypeResumeMixin, Trainer)``; set ``autotune_plan``."""

    autotune_plan: PlanFile

    def _load_from_checkpoint(self, resume_from_checkpoint: str, model: Any = None) -> None:
        trainer: Any = self
        target = trainer.model if model is None else model
        checkpoint = Path(resume_from_checkpoint)
        names = (ADAPTER_SAFE_WEIGHTS_NAME, ADAPTER_WEIGHTS_NAME)
        single_adapter = any((checkpoint / name).is_file() for name in names)
        if single_adapter and not trainer.is_fsdp_enabled and not trainer.is_deepspeed_enabled:
            from peft import PeftModel

            active = list(target.active_adapters) if isinstance(target, PeftModel) else []
        else:
            active = []
        if len(active) == 1:
            target.load_adapter(
                str(checkpoint),
                active[0],
                is_trainable=True,
                autocast_adapter_dtype=autocast_adapter_dtype(self.autotune_plan.setting),
            )
            return
        super()._load_from_checkpoint(resume_from_checkpoint, model)  # type: ignore[misc]
