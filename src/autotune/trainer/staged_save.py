"""Checkpoints are written under a temporary name and renamed when complete (see :mod:`.checkpoints`).

A mixin over transformers' ``Trainer`` (5.x): ``_save_checkpoint`` runs the Trainer's own save with
``_get_output_dir`` pointing at ``OUT/checkpoints/.staging`` (every rank writes its part there,
DeepSpeed and FSDP shards included), then global rank 0 publishes it (manifest + rename) and rotates
the published checkpoints (``save_total_limit``), with barriers so that no rank goes on before the
checkpoint is complete.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from transformers import Trainer
from transformers.trainer_utils import rotate_checkpoints

from autotune.schemas.plan import PlanFile
from autotune.trainer.checkpoints import STAGING_DIR, publish_checkpoint, set_aside_leftover
from autotune.trainer.resume_load import PlanDtypeResumeMixin
from autotune.trainer.token_count import RealTokenCountMixin


def _barrier() -> None:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.barrier()


class StagedSaveMixin:
    """Put before a ``Trainer`` class: ``class T(StagedSaveMixin, Trainer)``; set ``autotune_plan``."""

    autotune_plan: PlanFile
    _autotune_staging = False

    def _get_output_dir(self, trial: Any) -> str:
        run_dir: str = super()._get_output_dir(trial)  # type: ignore[misc]
        return str(Path(run_dir) / STAGING_DIR) if self._autotune_staging else run_dir

    def _save_checkpoint(self, model: Any, trial: Any) -> None:
        trainer: Any = self
        run_dir = Path(self._get_output_dir(trial))
        name = f"checkpoint-{trainer.state.global_step}"
        staged = run_dir / STAGING_DIR / name
        if trainer.is_world_process_zero():
            set_aside_leftover(staged)
        _barrier()
        self._autotune_staging = True
        try:
            super()._save_checkpoint(model, trial)  # type: ignore[misc]
        finally:
            self._autotune_staging = False
        _barrier()  # every rank has written its part
        if trainer.is_world_process_zero() and staged.is_dir():
            step = trainer.state.global_step
            publish_checkpoint(staged, run_dir / name, step, self.autotune_plan, torch.get_num_threads())
            rotate_checkpoints(output_dir=str(run_dir), save_total_limit=trainer.args.save_total_limit, use_mtime=True)
        _barrier()


def staged_trainer_class(base: type[Trainer], plan: PlanFile) -> type[Trainer]:
    """``base`` with staged checkpoint saves for ``plan`` (the plan is recorded in each manifest).

    It also reloads a checkpoint's adapters in the dtype the plan made them
    (:class:`autotune.trainer.resume_load.PlanDtypeResumeMixin`), so that a resumed run continues the same run, and
    counts the tokens of packed batches without their padding
    (:class:`autotune.trainer.token_count.RealTokenCountMixin`).
    """
    bases = (StagedSaveMixin, PlanDtypeResumeMixin, RealTokenCountMixin, base)
    return type(f"Staged{base.__name__}", bases, {"autotune_plan": plan})
