"""Optimizer and learning-rate schedule, as TrainingArguments names.

AdamW is Loshchilov & Hutter 2019; the 8-bit variants keep the two moments in 8-bit blocks
(Dettmers et al. 2022, "8-bit Optimizers via Block-wise Quantization"); the paged variant puts them in
unified memory that can spill to the host (bitsandbytes). The schedule is cosine decay to zero after a
linear warm-up (transformers ``get_cosine_schedule_with_warmup``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from autotune.schemas.setting import Optimizer

OPTIMIZER_NAMES: dict[Optimizer, str] = {
    "adamw": "adamw_torch",
    "adamw-8bit": "adamw_bnb_8bit",
    "paged-adamw-8bit": "paged_adamw_8bit",
}
"""Plan optimizer → TrainingArguments ``optim``."""


@dataclass(frozen=True)
class OptimizerChoice:
    """Optimizer name and schedule for TrainingArguments."""

    optim: str
    learning_rate: float
    warmup_ratio: float
    lr_scheduler_type: str = "cosine"

    def training_arguments(self) -> dict[str, Any]:
        """Keyword arguments for ``TrainingArguments`` (a float ``warmup_steps`` < 1 is a ratio of the steps)."""
        return {
            "optim": self.optim,
            "learning_rate": self.learning_rate,
            "lr_scheduler_type": self.lr_scheduler_type,
            "warmup_steps": self.warmup_ratio,
        }


def choose_optimizer(optimizer: Optimizer, learning_rate: float, warmup_ratio: float) -> OptimizerChoice:
    """Map the plan's optimizer to TrainingArguments names; cosine schedule with ``warmup_ratio`` warm-up."""
    return OptimizerChoice(optim=OPTIMIZER_NAMES[optimizer], learning_rate=learning_rate, warmup_ratio=warmup_ratio)
