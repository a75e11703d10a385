"""The plan's optimizer and recipe as TrainingArguments names (``trainer/optim.py``).

The contract: each plan optimizer maps to a name transformers accepts, the recipe's schedule and decay go through,
the command line's learning rate and warm-up replace the recipe's, and a warm-up ratio below 1 is what
TrainingArguments reads as a fraction of the steps.
"""

from __future__ import annotations

import typing
from pathlib import Path

import pytest

from autotune.schemas.recipe import TrainingRecipe
from autotune.schemas.setting import Optimizer
from autotune.trainer.optim import OPTIMIZER_NAMES, choose_optimizer

RECIPE = TrainingRecipe(learning_rate=2e-4, warmup_ratio=0.03, weight_decay=0.01, max_grad_norm=0.5)


def test_every_plan_optimizer_has_a_name() -> None:
    assert set(OPTIMIZER_NAMES) == set(typing.get_args(Optimizer))


def test_the_recipe_goes_through_and_the_command_line_replaces_it() -> None:
    kept = choose_optimizer("adamw", RECIPE)
    assert (kept.learning_rate, kept.warmup_ratio, kept.weight_decay, kept.max_grad_norm) == (2e-4, 0.03, 0.01, 0.5)
    assert kept.lr_scheduler_type == RECIPE.lr_scheduler
    given = choose_optimizer("adamw", RECIPE, learning_rate=1e-3, warmup_ratio=0.1)
    assert (given.learning_rate, given.warmup_ratio, given.weight_decay) == (1e-3, 0.1, 0.01)
    only_lr = choose_optimizer("adamw", RECIPE, learning_rate=1e-3)
    assert only_lr.warmup_ratio == 0.03


@pytest.mark.parametrize("optimizer", typing.get_args(Optimizer))
def test_transformers_reads_the_arguments_as_meant(optimizer: str, tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    from transformers import TrainingArguments
    from transformers.trainer_utils import SchedulerType

    choice = choose_optimizer(optimizer, RECIPE)  # type: ignore[arg-type]
    args = TrainingArguments(output_dir=str(tmp_path), use_cpu=True, **choice.training_arguments())
    assert args.optim == OPTIMIZER_NAMES[optimizer]  # type: ignore[index]  # a str enum
    assert args.lr_scheduler_type == SchedulerType(RECIPE.lr_scheduler)
    assert (args.learning_rate, args.weight_decay, args.max_grad_norm) == (2e-4, 0.01, 0.5)
    assert args.get_warmup_steps(1000) == 30  # 0.03 of the run's steps
