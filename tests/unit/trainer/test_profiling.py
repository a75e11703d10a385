"""``--profile-steps`` (``trainer/profiling.py``): the profiled window, its files, in-process with torch's profiler.

The contract: the window is the invocation's 2nd to (N+1)th optimizer steps (after a resumed run's checkpoint step),
marked untimed in the run's metrics; the profiler records those steps and writes a Chrome trace and an ops table
named by rank and steps, each whole; a file of that name already there is kept and said; a run that ends inside the
window writes what it recorded. The callback is driven as the Trainer drives it: ``on_step_begin`` with the steps
done so far, ``on_step_end`` after ``global_step`` counted the step; the "step" is a small matmul on the CPU.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("transformers")

import torch

from autotune.trainer.args import TrainerArgs
from autotune.trainer.callbacks import RunMetrics
from autotune.trainer.profiling import PROFILE_DIR, ProfileCallback, profile_callbacks

UNUSED: Any = None


def _run(callback: ProfileCallback, start_step: int, steps: int, rank: int = 0) -> None:
    """Drive ``steps`` optimizer steps from global step ``start_step``; each runs one 32×32 matmul."""
    state = SimpleNamespace(global_step=start_step)
    args = SimpleNamespace(process_index=rank)
    callback.on_train_begin(args, state, UNUSED)  # type: ignore[arg-type]
    for _ in range(steps):
        callback.on_step_begin(args, state, UNUSED)  # type: ignore[arg-type]
        torch.ones(32, 32) @ torch.ones(32, 32)
        state.global_step += 1
        callback.on_step_end(args, state, UNUSED)  # type: ignore[arg-type]
    callback.on_train_end(args, state, UNUSED)  # type: ignore[arg-type]


def test_a_resumed_run_profiles_its_2nd_to_n_plus_1th_steps_and_leaves_them_out_of_the_timings(tmp_path: Path) -> None:
    metrics = RunMetrics()
    _run(ProfileCallback(tmp_path, 2, metrics), start_step=10, steps=5, rank=1)
    assert metrics.untimed_steps == {12, 13}
    trace = tmp_path / PROFILE_DIR / "trace-rank1-steps12-13.json"
    ops = tmp_path / PROFILE_DIR / "ops-rank1-steps12-13.txt"
    assert sorted(p.name for p in (tmp_path / PROFILE_DIR).iterdir()) == [ops.name, trace.name]
    events = json.loads(trace.read_text())["traceEvents"]
    assert sum(1 for event in events if event.get("name") == "aten::mm") == 2  # the two recorded steps' matmuls
    assert "aten::mm" in ops.read_text() and "Self CPU" in ops.read_text()


def test_a_run_that_ends_inside_the_window_writes_what_it_recorded(tmp_path: Path) -> None:
    _run(ProfileCallback(tmp_path, 5, RunMetrics()), start_step=0, steps=3)
    trace = tmp_path / PROFILE_DIR / "trace-rank0-steps2-3.json"
    assert sum(1 for event in json.loads(trace.read_text())["traceEvents"] if event.get("name") == "aten::mm") == 2


def test_a_file_already_there_is_kept_and_said(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    existing = tmp_path / PROFILE_DIR / "ops-rank0-steps2-2.txt"
    existing.parent.mkdir()
    existing.write_text("an earlier table")
    with caplog.at_level(logging.WARNING, logger="autotune.trainer"):
        _run(ProfileCallback(tmp_path, 1, RunMetrics()), start_step=0, steps=2)
    assert existing.read_text() == "an earlier table"
    assert f"{existing} already exists" in caplog.text
    assert (tmp_path / PROFILE_DIR / "trace-rank0-steps2-2.json").is_file()


def test_the_callback_is_made_only_when_asked(tmp_path: Path) -> None:
    base = {"plan_path": tmp_path / "plan.yaml", "dataset": "d", "output_dir": str(tmp_path)}
    assert profile_callbacks(TrainerArgs(**base), RunMetrics()) == []
    (callback,) = profile_callbacks(TrainerArgs(**base, profile_steps=3), RunMetrics())
    assert (callback.out, callback.steps) == (tmp_path / PROFILE_DIR, 3)
