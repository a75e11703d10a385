"""The Trainer callback that marks each finished checkpoint complete (see :mod:`autotune.trainer.checkpoints`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from autotune.schemas.plan import PlanFile
from autotune.trainer.checkpoints import write_manifest


class ManifestCallback(TrainerCallback):
    """After each save (every rank done), global rank 0 writes the checkpoint's manifest."""

    def __init__(self, plan: PlanFile, checkpoints_dir: Path) -> None:
        self.plan = plan
        self.checkpoints_dir = checkpoints_dir

    def on_save(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.barrier()  # every rank has written its shard
        if state.is_world_process_zero:
            checkpoint = self.checkpoints_dir / f"checkpoint-{state.global_step}"
            if checkpoint.is_dir():
                write_manifest(checkpoint, state.global_step, self.plan)
