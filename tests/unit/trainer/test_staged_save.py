"""Staged checkpoint saves (``trainer/staged_save.py``), in-process over a stand-in for the Trainer's own save.

The contract: the Trainer's save writes under ``OUT/checkpoints/.staging``; once it has finished, rank 0 publishes the
checkpoint (manifest, rename to ``checkpoint-<step>``) and rotates to ``save_total_limit``; a leftover of a killed save
is set aside, never deleted; a save that fails publishes nothing. The stand-in writes what the Trainer writes that
the manifest checks read (``trainer_state.json`` with the step, a config), into the directory the mixin points it at.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("transformers")

from plans import make_plan

from autotune.schemas.plan_changes import plan_fingerprint
from autotune.trainer.checkpoints import IGNORED_DIR, MANIFEST, STAGING_DIR, read_manifest, verify_checkpoint
from autotune.trainer.resume_load import PlanDtypeResumeMixin
from autotune.trainer.staged_save import StagedSaveMixin, staged_trainer_class
from autotune.trainer.token_count import RealTokenCountMixin

PLAN = make_plan()


class StandInTrainer:
    """The parts of transformers' ``Trainer`` the mixin calls: the run directory, the save, the rank, the limit."""

    def __init__(self, run_dir: Path, *, rank_zero: bool = True, fail: bool = False) -> None:
        self.run_dir = run_dir
        self.state = SimpleNamespace(global_step=0)
        self.args = SimpleNamespace(save_total_limit=2)
        self.rank_zero, self.fail = rank_zero, fail
        self.written_to: list[Path] = []

    def is_world_process_zero(self) -> bool:
        return self.rank_zero

    def _get_output_dir(self, trial: Any) -> str:
        return str(self.run_dir)

    def _save_checkpoint(self, model: Any, trial: Any) -> None:
        step = self.state.global_step
        folder = Path(self._get_output_dir(trial)) / f"checkpoint-{step}"
        folder.mkdir(parents=True)
        self.written_to.append(folder)
        (folder / "config.json").write_text('{"hidden_size": 64}')
        if self.fail:
            raise OSError("disk went away")
        (folder / "trainer_state.json").write_text(json.dumps({"global_step": step}))


def _trainer(run_dir: Path, **kwargs: Any) -> Any:
    cls: Any = staged_trainer_class(StandInTrainer, PLAN)  # type: ignore[arg-type]
    return cls(run_dir, **kwargs)


def _save(trainer: Any, step: int) -> None:
    trainer.state.global_step = step
    trainer._save_checkpoint(None, None)


def test_the_save_is_written_under_staging_then_published_with_its_manifest(tmp_path: Path) -> None:
    trainer = _trainer(tmp_path)
    _save(trainer, 3)
    assert trainer.written_to == [tmp_path / STAGING_DIR / "checkpoint-3"]
    published = tmp_path / "checkpoint-3"
    assert verify_checkpoint(published) is None
    manifest = read_manifest(published)
    assert manifest["step"] == 3 and set(manifest["files"]) == {"config.json", "trainer_state.json"}
    assert manifest["plan"] == plan_fingerprint(PLAN)
    assert not (tmp_path / STAGING_DIR).exists()  # no empty staging folder left in the run
    assert trainer._get_output_dir(None) == str(tmp_path)  # outside a save: the run directory


def test_a_killed_saves_leftover_is_set_aside_and_the_save_goes_on(tmp_path: Path) -> None:
    leftover = tmp_path / STAGING_DIR / "checkpoint-3"
    leftover.mkdir(parents=True)
    (leftover / "half-written.bin").write_bytes(b"\0" * 10)
    _save(_trainer(tmp_path), 3)
    assert verify_checkpoint(tmp_path / "checkpoint-3") is None
    assert (tmp_path / IGNORED_DIR / "checkpoint-3" / "half-written.bin").is_file()  # kept, not deleted


def test_a_failed_save_publishes_nothing_and_ends_the_staging(tmp_path: Path) -> None:
    trainer = _trainer(tmp_path, fail=True)
    with pytest.raises(OSError, match="disk went away"):
        _save(trainer, 2)
    assert not (tmp_path / "checkpoint-2").exists()
    assert (tmp_path / STAGING_DIR / "checkpoint-2").is_dir()  # a partial that --resume sets aside
    assert trainer._get_output_dir(None) == str(tmp_path)


def test_only_rank_zero_publishes(tmp_path: Path) -> None:
    _save(_trainer(tmp_path, rank_zero=False), 2)
    assert not (tmp_path / "checkpoint-2").exists()
    assert not (tmp_path / STAGING_DIR / "checkpoint-2" / MANIFEST).exists()


def test_published_checkpoints_are_rotated_to_the_save_total_limit(tmp_path: Path) -> None:
    trainer = _trainer(tmp_path)
    for step in (1, 2, 3):
        _save(trainer, step)
        os.utime(tmp_path / f"checkpoint-{step}", (1_000 + step, 1_000 + step))  # the rotation orders by mtime
    assert sorted(p.name for p in tmp_path.glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-3"]


def test_the_class_puts_the_mixins_before_the_trainer_and_records_the_plan() -> None:
    cls: Any = staged_trainer_class(StandInTrainer, PLAN)  # type: ignore[arg-type]
    assert cls.__mro__[1:5] == (StagedSaveMixin, PlanDtypeResumeMixin, RealTokenCountMixin, StandInTrainer)
    assert cls.autotune_plan is PLAN and cls.__name__ == "StagedStandInTrainer"
