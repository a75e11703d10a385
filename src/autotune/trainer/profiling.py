"""``--profile-steps N``: record N optimizer steps with torch's profiler, where a prediction and a run disagree.

The steps recorded are the invocation's 2nd to (N+1)th (the first warms up: compile, allocator, kernel choice). For
each rank the callback writes ``OUT/profile/trace-rank{R}-steps{A}-{B}.json`` (a Chrome trace: Perfetto or
chrome://tracing show each stream, the host-device copies of CPU offload and the CPU's gaps) and
``OUT/profile/ops-rank{R}-steps{A}-{B}.txt`` (the profiler's table of ops, sorted by self time on the GPU where it
ran, else on the CPU), A..B the global steps recorded (a resumed run's window comes after the checkpoint's step), each
written whole (``fileio.write_atomic``); a file of that name already there is kept, and said. ``torch.profiler``
with CPU activity, and CUDA activity when a GPU is visible (PyTorch docs, "PyTorch Profiler").

Profiling slows the steps it records, so they are left out of the run's timings (``RunMetrics.untimed_steps``): the
report's step, micro-step and tokens/s figures come from the other steps, and its ``profiled_steps`` lists them.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path
from typing import Any

import torch
from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from autotune.errors import InvalidRequestError
from autotune.fileio import write_atomic
from autotune.trainer.args import TrainerArgs
from autotune.trainer.callbacks import RunMetrics

logger = logging.getLogger("autotune.trainer")

PROFILE_DIR = "profile"
"""The folder under the run directory that holds the profiles."""

TABLE_ROWS = 40
"""Rows of the ops table (the ops with the most self time)."""


class ProfileCallback(TrainerCallback):
    """Profile optimizer steps 2..``steps`` + 1 of this invocation and write the trace and the ops table per rank."""

    def __init__(self, run_dir: Path, steps: int, metrics: RunMetrics) -> None:
        """Record ``steps`` optimizer steps into ``run_dir / PROFILE_DIR``; mark them untimed in ``metrics``."""
        self.out = run_dir / PROFILE_DIR
        self.steps = steps
        self.metrics = metrics
        self.rank = 0
        self._window: range = range(0)
        self._profiler: Any = None

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        """Fix the window and the rank that names the files.

        The window: the global steps ending the invocation's 2nd to (``steps`` + 1)th optimizer steps. The rank: this
        process's global rank, ``TrainingArguments.process_index``.
        """
        self.rank = args.process_index
        self._window = range(state.global_step + 2, state.global_step + 2 + self.steps)
        self.metrics.untimed_steps.update(self._window)

    def on_step_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        """Start the profiler at the first step of the window (``state.global_step`` counts the steps done)."""
        if self._profiler is None and state.global_step + 1 == self._window.start:
            activities = [torch.profiler.ProfilerActivity.CPU]
            if torch.cuda.is_available():
                activities.append(torch.profiler.ProfilerActivity.CUDA)
            self._profiler = torch.profiler.profile(activities=activities)
            self._profiler.__enter__()

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        """Stop at the last step of the window and write the files."""
        if self._profiler is not None and state.global_step + 1 == self._window.stop:
            self._finish(state.global_step)

    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        """A run that ends inside the window writes what it recorded."""
        if self._profiler is not None:
            self._finish(state.global_step)

    def _finish(self, last_step: int) -> None:
        profiler, self._profiler = self._profiler, None
        profiler.__exit__(None, None, None)
        self.out.mkdir(parents=True, exist_ok=True)
        name = f"rank{self.rank}-steps{self._window.start}-{last_step}"
        sort_by = "self_cuda_time_total" if torch.cuda.is_available() else "self_cpu_time_total"
        table = profiler.key_averages().table(sort_by=sort_by, row_limit=TABLE_ROWS)
        with tempfile.TemporaryDirectory() as scratch:
            exported = Path(scratch) / "trace.json"
            profiler.export_chrome_trace(str(exported))
            files = {f"trace-{name}.json": exported.read_bytes(), f"ops-{name}.txt": (table + "\n").encode()}
        for file_name, content in files.items():
            try:
                write_atomic(self.out / file_name, content, what="profile")
            except InvalidRequestError as error:
                logger.warning("%s", error)
        logger.info("profile of steps %d-%d written to %s", self._window.start, last_step, self.out)


def profile_callbacks(args: TrainerArgs, metrics: RunMetrics) -> list[ProfileCallback]:
    """The run's profiler callback when ``--profile-steps`` was given (every rank profiles itself), else none."""
    if args.profile_steps is None:
        return []
    return [ProfileCallback(args.run_dir, args.profile_steps, metrics)]
