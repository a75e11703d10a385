"""Command line of ``python -m autotune.trainer``: parsed once at the edge into :class:`TrainerArgs`.

The parser is generated from the schema (:class:`autotune.schemas.trainer_options.TrainerOptions` plus the
two options only the launcher writes: ``--plan`` and ``--deepspeed-config``), so flags, defaults, bounds and
help texts are those of ``autotune launch``. argparse only collects strings; pydantic converts and checks them,
and a bad value is one line naming the flag, exit code 2 (argparse's usage-error convention).
"""

from __future__ import annotations

import argparse
import typing
from pathlib import Path

from pydantic import Field, ValidationError

from autotune.schemas.trainer_options import TrainerOptions, option_flag
from autotune.validation import format_validation_error

FLAGS = {"plan_path": "--plan"}
"""Fields whose flag is not their dashed name."""


class TrainerArgs(TrainerOptions):
    """Everything the training core takes besides the plan file's contents."""

    plan_path: Path = Field(description="plan.yaml written by 'autotune plan -o' (or by launch into the run).")
    deepspeed_config: Path | None = Field(
        default=None, description="DeepSpeed JSON (ZeRO plans; written by autotune launch)."
    )

    @property
    def run_dir(self) -> Path:
        """``OUT`` as a path."""
        return Path(self.output_dir)

    @property
    def checkpoints_dir(self) -> Path:
        """Where Trainer checkpoints go: ``OUT/checkpoints/checkpoint-<step>/``."""
        return self.run_dir / "checkpoints"

    @property
    def report_path(self) -> Path:
        """``OUT/run_report.json``."""
        return self.run_dir / "run_report.json"

    @property
    def final_dir(self) -> Path:
        """``OUT/final/``: the adapter or full weights and the tokenizer."""
        return self.run_dir / "final"


def _flag(name: str) -> str:
    return FLAGS.get(name, option_flag(name))


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser, one option per :class:`TrainerArgs` field (docs/usage.md, "Launch", describes them)."""
    parser = argparse.ArgumentParser(
        prog="python -m autotune.trainer",
        description="Run the shared autotune training core with exactly the setting of a plan file.",
        argument_default=argparse.SUPPRESS,  # options not given keep the schema's defaults
    )
    fields = sorted(TrainerArgs.model_fields.items(), key=lambda item: item[0] != "plan_path")  # --plan first
    for name, field in fields:
        help_text = field.description or ""
        if field.annotation is bool:
            parser.add_argument(_flag(name), dest=name, action="store_true", help=help_text)
            continue
        choices = typing.get_args(field.annotation) if typing.get_origin(field.annotation) is typing.Literal else None
        if not field.is_required() and field.default is not None:
            help_text += f" (default: {field.default})"
        metavar = None if choices else _flag(name)[2:].upper().replace("-", "_")
        parser.add_argument(
            _flag(name), dest=name, required=field.is_required(), choices=choices, metavar=metavar, help=help_text
        )
    return parser


def parse_args(argv: list[str] | None = None) -> TrainerArgs:
    """Parse the command line into :class:`TrainerArgs` (exit code 2 with one line on a usage error)."""
    parser = build_parser()
    values = vars(parser.parse_args(argv))
    try:
        return TrainerArgs.model_validate(values)
    except ValidationError as error:
        parser.error(format_validation_error(error, TrainerArgs, flags=FLAGS))
