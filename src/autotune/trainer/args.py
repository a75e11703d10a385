"""Command line of ``python -m autotune.trainer``: parsed once at the edge into plain values."""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

DatasetFormat = Literal["auto", "instruction", "chat", "text"]
DATASET_FORMATS: tuple[DatasetFormat, ...] = ("auto", "instruction", "chat", "text")


@dataclass(frozen=True)
class TrainerArgs:
    """Everything the training core takes besides the plan file's contents."""

    plan_path: Path
    dataset: str
    output_dir: Path
    dataset_format: DatasetFormat = "auto"
    max_steps: int | None = None
    cpu: bool = False
    resume: bool = False
    deepspeed_config: Path | None = None
    save_steps: int = 50
    logging_steps: int = 1
    learning_rate: float = 2e-4
    warmup_ratio: float = 0.03
    seed: int = 42

    @property
    def checkpoints_dir(self) -> Path:
        """Where Trainer checkpoints go: ``OUT/checkpoints/checkpoint-<step>/``."""
        return self.output_dir / "checkpoints"

    @property
    def report_path(self) -> Path:
        """``OUT/run_report.json``."""
        return self.output_dir / "run_report.json"

    @property
    def final_dir(self) -> Path:
        """``OUT/final/``: the adapter or full weights and the tokenizer."""
        return self.output_dir / "final"


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser (the contract in trainer_contract.md fixes these names)."""
    parser = argparse.ArgumentParser(
        prog="python -m autotune.trainer",
        description="Run the shared autotune training core with exactly the setting of a plan file.",
    )
    parser.add_argument("--plan", required=True, type=Path, help="plan.yaml written by 'autotune plan -o'.")
    parser.add_argument("--dataset", required=True, help="Local JSONL / JSON / parquet / text file or hub name.")
    parser.add_argument("--output-dir", required=True, type=Path, help="Run directory (checkpoints, report).")
    parser.add_argument("--dataset-format", choices=DATASET_FORMATS, default="auto", help="Default: auto-detect.")
    parser.add_argument("--max-steps", type=_positive_int, help="Stop after N optimizer steps (default: epochs).")
    parser.add_argument("--cpu", action="store_true", help="Train on the CPU (gloo backend when distributed).")
    parser.add_argument("--resume", action="store_true", help="Continue from the last checkpoint in OUT.")
    parser.add_argument("--deepspeed-config", type=Path, help="DeepSpeed JSON (ZeRO plans; written by launch).")
    parser.add_argument("--save-steps", type=_positive_int, default=50, help="Checkpoint every N steps.")
    parser.add_argument("--logging-steps", type=_positive_int, default=1, help="Log the loss every N steps.")
    parser.add_argument("--learning-rate", type=float, default=2e-4, help="Peak learning rate.")
    parser.add_argument("--warmup-ratio", type=float, default=0.03, help="Fraction of steps of linear warm-up.")
    parser.add_argument("--seed", type=int, default=42, help="Random seed (data order, init of adapters).")
    return parser


def parse_args(argv: list[str] | None = None) -> TrainerArgs:
    """Parse the command line into :class:`TrainerArgs` (argparse exits 2 on a usage error)."""
    parser = build_parser()
    ns = parser.parse_args(argv)
    if not 0.0 <= ns.warmup_ratio < 1.0:
        parser.error(f"--warmup-ratio must be in [0, 1), got {ns.warmup_ratio}")
    if not math.isfinite(ns.learning_rate) or ns.learning_rate <= 0:
        parser.error(f"--learning-rate must be > 0, got {ns.learning_rate}")
    return TrainerArgs(
        plan_path=ns.plan,
        dataset=ns.dataset,
        output_dir=ns.output_dir,
        dataset_format=ns.dataset_format,
        max_steps=ns.max_steps,
        cpu=ns.cpu,
        resume=ns.resume,
        deepspeed_config=ns.deepspeed_config,
        save_steps=ns.save_steps,
        logging_steps=ns.logging_steps,
        learning_rate=ns.learning_rate,
        warmup_ratio=ns.warmup_ratio,
        seed=ns.seed,
    )
