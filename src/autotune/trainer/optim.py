"""Optimizer and learning-rate schedule, as TrainingArguments names.

AdamW is Loshchilov & Hutter 2019; the 8-bit variants keep the two moments in 8-bit blocks
(Dettmers et al. 2022, "8-bit Optimizers via Block-wise Quantization"); the paged variant puts them in
unified memory that can spill to the host (bitsandbytes). The schedule, warm-up, weight decay and clipping are the
plan's training recipe (:mod:`autotune.schemas.recipe`; cosine decay to zero after a linear warm-up by default,
transformers ``get_cosine_schedule_with_warmup``), with ``--learning-rate`` / ``--warmup-ratio`` overriding it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from autotune.schemas.recipe import TrainingRecipe
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
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0

    def training_arguments(self) -> dict[str, Any]:
        """Keyword arguments for ``TrainingArguments`` (a float ``warmup_steps`` < 1 is a ratio of the steps)."""
        return {
            "optim": self.optim,
            "learning_rate": self.learning_rate,
            "lr_scheduler_type": self.lr_scheduler_type,
            "warmup_steps": self.warmup_ratio,
            "weight_decay": self.weight_decay,
            "max_grad_norm": self.max_grad_norm,
        }


def choose_optimizer(
    optimizer: Optimizer,
    recipe: TrainingRecipe,
    learning_rate: float | None = None,
    warmup_ratio: float | None = None,
) -> OptimizerChoice:
    """Map the plan's optimizer and training recipe to TrainingArguments names.

    ``learning_rate`` / ``warmup_ratio`` (the command line's, None = not given) replace the recipe's
    (:meth:`TrainingRecipe.overridden`).
    """
    recipe = recipe.overridden(learning_rate, warmup_ratio)
    return OptimizerChoice(
        optim=OPTIMIZER_NAMES[optimizer],
        learning_rate=recipe.learning_rate,
        warmup_ratio=recipe.warmup_ratio,
        lr_scheduler_type=recipe.lr_scheduler,
        weight_decay=recipe.weight_decay,
        max_grad_norm=recipe.max_grad_norm,
    )
