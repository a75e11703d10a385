"""The training core's run options (everything besides the plan): one schema, one description per option.

:class:`TrainerOptions` is the contract between ``autotune launch`` and ``python -m autotune.trainer`` (docs/usage.md,
"Launch", describes the options): the launcher's :class:`~autotune.launcher.options.LaunchOptions` extends it with
process placement, and the trainer's argparse parser is generated from it (:func:`option_flag` names each
flag), so a default, a bound or a help text exists once.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from autotune.schemas._base import FrozenModel
from autotune.schemas.recipe import ADAPTER_LEARNING_RATE, FULL_LEARNING_RATE, WARMUP_RATIO

DatasetFormat = Literal["auto", "instruction", "chat", "text"]
Tracker = Literal["none", "tensorboard", "wandb", "mlflow", "trackio"]

TRACKER_PACKAGES: dict[str, str] = {name: name for name in ("tensorboard", "wandb", "mlflow", "trackio")}
"""``--report-to`` value → the package transformers' integration imports (``transformers.integrations``), which is
also the name of this project's optional extra (``pip install -e ".[tensorboard]"``)."""


EvalDatasetField = Annotated[
    str | None,
    Field(
        min_length=1,
        description="Held-out data for the eval loss (the formats of --dataset), evaluated at the end and every "
        "--eval-steps.",
    ),
]
"""``--eval-dataset`` (launch, plan, estimate): one declaration for :class:`TrainerOptions` and :class:`EvalData`."""

EvalFractionField = Annotated[
    float | None,
    Field(
        gt=0,
        lt=0.5,
        description="Hold out this fraction of --dataset's rows for the eval loss (a split seeded by --seed).",
    ),
]
"""``--eval-fraction``: its bounds are the one rule launch, plan and estimate refuse by."""

EvalStepsField = Annotated[
    int | None,
    Field(
        ge=1,
        description="Eval loss every N optimizer steps as well as at the end (needs --eval-dataset or "
        "--eval-fraction).",
    ),
]
"""``--eval-steps``."""


def check_eval_options(eval_dataset: str | None, eval_fraction: float | None, eval_steps: int | None) -> None:
    """The eval options' combination rule (launch's, plan's and estimate's).

    Raises:
        ValueError: both held-out sources, or ``eval_steps`` without one.
    """
    if eval_dataset is not None and eval_fraction is not None:
        raise ValueError("give --eval-dataset or --eval-fraction, not both")
    if eval_steps is not None and eval_dataset is None and eval_fraction is None:
        raise ValueError("--eval-steps needs held-out data: add --eval-dataset FILE or --eval-fraction F")


def held_out_rows(rows: int, eval_fraction: float) -> int:
    """Rows ``--eval-fraction`` holds out of ``rows``: ``round(rows × eval_fraction)`` (the core's seeded split).

    The training core splits with ``datasets.Dataset.train_test_split(test_size=held_out_rows(...))``
    (``trainer.train``); the planner prices the same split.

    Raises:
        ValueError: the split leaves no row on one side (one line naming ``--eval-fraction``).
    """
    held_out = round(rows * eval_fraction)
    if held_out < 1 or held_out >= rows:
        raise ValueError(
            f"--eval-fraction {eval_fraction:g} of {rows} rows holds out {held_out}: choose a fraction that leaves "
            "rows on both sides"
        )
    return held_out


class EvalData(FrozenModel):
    """Where a plan's eval loss comes from (``plan --eval-dataset`` / ``--eval-fraction``): one of the two.

    ``autotune launch PLAN`` evaluates on it unless the launch gives eval options of its own; the eval schedule
    (``--eval-steps``) is the plan workload's ``eval_steps``.
    """

    eval_dataset: EvalDatasetField = None
    eval_fraction: EvalFractionField = None

    @model_validator(mode="after")
    def _one_eval_source(self) -> EvalData:
        check_eval_options(self.eval_dataset, self.eval_fraction, None)
        if self.eval_dataset is None and self.eval_fraction is None:
            raise ValueError("eval data needs eval_dataset or eval_fraction")
        return self


class TrainerOptions(FrozenModel):
    """Run options of the training core that are not part of the plan: data, output, trainer knobs.

    Defaults are the training core's; ``model_fields_set`` tells which options were given.
    """

    dataset: str = Field(
        min_length=1, description="Training data: a local JSONL / JSON / parquet file or a hub dataset name."
    )
    dataset_format: DatasetFormat = Field(
        default="auto",
        description="Dataset format: instruction, chat, text, or auto (detected from the keys).",
    )
    output_dir: str = Field(min_length=1, description="Run directory (must not exist unless --resume).")
    max_steps: int | None = Field(
        default=None, ge=1, description="Stop after this many optimizer steps (default: the plan's epochs)."
    )
    cpu: bool = Field(default=False, description="Run on the CPU (multi-process runs use torchrun + gloo).")
    resume: bool = Field(default=False, description="Continue the run in --output-dir from its last checkpoint.")
    save_steps: int = Field(default=50, ge=1, description="Checkpoint every N optimizer steps.")
    logging_steps: int = Field(default=1, ge=1, description="Log the loss every N optimizer steps.")
    learning_rate: float | None = Field(
        default=None,
        gt=0,
        le=1,
        description="Peak learning rate (default: the plan's training.learning_rate, by method: full "
        f"{FULL_LEARNING_RATE:.0e}, lora / qlora {ADAPTER_LEARNING_RATE:.0e}).".replace("e-0", "e-"),
    )
    warmup_ratio: float | None = Field(
        default=None,
        ge=0,
        lt=1,
        description="Fraction of the steps spent warming up the learning rate, linearly (default: the plan's "
        f"training.warmup_ratio, {WARMUP_RATIO:g}).",
    )
    seed: int = Field(
        default=42,
        ge=0,
        description="Random seed, set before anything random happens (adapter init, data order, dropout).",
    )
    full_determinism: bool = Field(
        default=False,
        description="Also make kernels deterministic (transformers.enable_full_determinism; slower).",
    )
    eval_dataset: EvalDatasetField = None
    eval_fraction: EvalFractionField = None
    eval_steps: EvalStepsField = None

    profile_steps: int | None = Field(
        default=None,
        ge=1,
        le=20,
        description="Record optimizer steps 2 to N+1 with torch.profiler and write OUT/profile/: a Chrome trace and a "
        "table of the ops by self time, per rank; those steps are left out of the report's timings.",
    )
    report_to: Tracker = Field(
        default="none",
        description="Send the logged loss, learning rate, eval loss and tokens seen (real tokens, not padding) to a "
        "tracker through transformers' own integration: tensorboard (event files in OUT/tensorboard), wandb, mlflow, "
        "trackio; each needs its package (an optional extra).",
    )

    @model_validator(mode="after")
    def _one_eval_source(self) -> TrainerOptions:
        check_eval_options(self.eval_dataset, self.eval_fraction, self.eval_steps)
        return self


def option_flag(name: str) -> str:
    """The command-line flag of a field: ``max_steps`` → ``--max-steps``."""
    return "--" + name.replace("_", "-")
