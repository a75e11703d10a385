"""Trainer callbacks: timing and losses for the report, the progress display, clean stops.

Clean stops on signals, and a stop when the loss stops being a finite number.
"""

from __future__ import annotations

import json
import math
import signal
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import torch
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from autotune.trainer.memory import peak_memory


@dataclass
class RunMetrics:
    """What the callbacks measured during one invocation (shared with the report).

    ``step_times_s`` are the wall times between consecutive optimizer-step ends (data, compute,
    optimizer, logging); ``micro_step_times_s`` the forward+backward time of one micro batch, i.e.
    (pre-optimizer time − step-begin time) / grad_accum; both exclude the first step of the invocation
    (compile, allocator and kernel warm-up).
    """

    losses: list[float] = field(default_factory=list)
    loss_steps: list[int] = field(default_factory=list)
    eval_losses: list[float] = field(default_factory=list)
    eval_loss_steps: list[int] = field(default_factory=list)
    step_times_s: list[float] = field(default_factory=list)
    micro_step_times_s: list[float] = field(default_factory=list)
    first_step: int | None = None
    tokens_at_start: int = 0
    tokens_after_first_step: int = 0
    tokens_at_end: int = 0
    untimed_steps: set[int] = field(default_factory=set)
    """Global steps (numbered by the step they complete) left out of the timings: the profiled ones
    (:mod:`autotune.trainer.profiling`)."""
    untimed_tokens: int = 0
    """Tokens of the untimed steps after the first (left out of :meth:`tokens_per_s` with their time)."""

    def restore_history(self, checkpoint: Path) -> None:
        """Put the losses and eval losses logged up to ``checkpoint`` first: a resumed run's report holds the whole run.

        They come from the checkpoint's ``trainer_state.json``: its ``log_history`` is what the Trainer logged up to
        the save (the same values :class:`MetricsCallback` records: the ``logs`` of ``Trainer.log``), kept when
        finite and at most the checkpoint's ``global_step``. An unreadable file adds nothing (the checkpoint was
        verified before the resume).
        """
        try:
            state = json.loads((checkpoint / "trainer_state.json").read_text(encoding="utf-8"))
            last = int(state["global_step"])
            history = [entry for entry in state.get("log_history", []) if isinstance(entry, dict)]
        except (OSError, ValueError, KeyError, TypeError):
            return
        series = (("loss", self.losses, self.loss_steps), ("eval_loss", self.eval_losses, self.eval_loss_steps))
        for entry in history:
            step = entry.get("step")
            if not isinstance(step, int) or step > last:
                continue
            for key, values, steps in series:
                value = entry.get(key)
                if isinstance(value, int | float) and math.isfinite(float(value)):
                    values.append(float(value))
                    steps.append(step)

    def median_step_time_s(self) -> float | None:
        """Median optimizer-step time, or None if fewer than one timed step."""
        return statistics.median(self.step_times_s) if self.step_times_s else None

    def median_micro_step_time_s(self) -> float | None:
        """Median micro-step (forward+backward) time, or None."""
        return statistics.median(self.micro_step_times_s) if self.micro_step_times_s else None

    def tokens_per_s(self) -> float | None:
        """Real tokens (all ranks) of the timed steps / their summed wall time; None before a second step.

        The timed steps are every step after the invocation's first (``step_times_s``); their tokens are those seen
        since the first step ended. A mean over the steps, not tokens per step over the median step: padded batches
        differ in length from step to step, and the median step is a short one (a padded CPU run of the demo model
        measured 148 tokens/s by the median, 82 by the mean; ``benchmarks/packing_ratio.py``).
        """
        timed_s = sum(self.step_times_s)
        if not self.step_times_s or timed_s <= 0:
            return None
        return (self.tokens_at_end - self.tokens_after_first_step - self.untimed_tokens) / timed_s


class MetricsCallback(TrainerCallback):
    """Record logged losses (finite ones), step and micro-step times, and tokens seen.

    A NaN/inf loss stops the run and its report's message names it.
    """

    def __init__(self, metrics: RunMetrics, grad_accum: int) -> None:
        """Record into ``metrics``; ``grad_accum`` micro-steps make one optimizer step."""
        self.metrics = metrics
        self.grad_accum = grad_accum
        self._step_begin_s: float | None = None
        self._last_step_end_s: float | None = None

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        """Record the starting step and token count (a resumed run starts past 0)."""
        self.metrics.first_step = state.global_step
        self.metrics.tokens_at_start = state.num_input_tokens_seen
        self.metrics.tokens_after_first_step = state.num_input_tokens_seen
        self.metrics.tokens_at_end = state.num_input_tokens_seen

    def on_step_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        """Note when the optimizer step begins (after an untimed step, the next step's time starts here)."""
        self._step_begin_s = time.perf_counter()
        if state.global_step in self.metrics.untimed_steps and self._last_step_end_s is not None:
            self._last_step_end_s = self._step_begin_s  # what a profiler did after that step is not this step's

    def on_pre_optimizer_step(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        """Record the mean micro-step time of this step (the first step of the run and untimed steps are left out)."""
        untimed = state.global_step + 1 in self.metrics.untimed_steps  # global_step counts the steps done so far
        if self._step_begin_s is not None and state.global_step > (self.metrics.first_step or 0) and not untimed:
            self.metrics.micro_step_times_s.append((time.perf_counter() - self._step_begin_s) / self.grad_accum)

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        """Record the time since the last step's end and the tokens seen."""
        now = time.perf_counter()
        if self._last_step_end_s is None:
            self.metrics.tokens_after_first_step = state.num_input_tokens_seen  # the untimed first step's tokens
        elif state.global_step in self.metrics.untimed_steps:
            self.metrics.untimed_tokens += state.num_input_tokens_seen - self.metrics.tokens_at_end
        else:
            self.metrics.step_times_s.append(now - self._last_step_end_s)
        self._last_step_end_s = now
        self.metrics.tokens_at_end = state.num_input_tokens_seen

    def on_log(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        logs: dict[str, float] | None = None,
        **kwargs: Any,
    ) -> None:
        """Record a logged loss when it is finite, with its step."""
        if logs and "loss" in logs and math.isfinite(float(logs["loss"])):  # JSON has no NaN: the message says it
            self.metrics.losses.append(float(logs["loss"]))
            self.metrics.loss_steps.append(state.global_step)

    def on_evaluate(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        metrics: dict[str, float] | None = None,
        **kwargs: Any,
    ) -> None:
        """Record the eval loss with its step; the next step's time starts after the evaluation (not counted)."""
        if metrics and "eval_loss" in metrics and math.isfinite(float(metrics["eval_loss"])):
            self.metrics.eval_losses.append(float(metrics["eval_loss"]))
            self.metrics.eval_loss_steps.append(state.global_step)
        if self._last_step_end_s is not None:
            self._last_step_end_s = time.perf_counter()


class ProgressCallback(TrainerCallback):
    """A rich progress bar with loss, learning rate, tokens/s and peak memory (main process only).

    When stderr is not a terminal (logs, CI) one plain line per logged step is printed instead.
    """

    def __init__(self, metrics: RunMetrics, console: Console | None = None) -> None:
        """Show progress from ``metrics`` on ``console`` (default: a stderr console)."""
        self.metrics = metrics
        self.console = console or Console(stderr=True, highlight=False)
        self._progress: Progress | None = None
        self._task: Any = None
        self._fields: dict[str, str] = {"loss": "-", "lr": "-", "tps": "-", "mem": "-"}

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        """Start the live progress bar on the main process when stderr is a terminal."""
        if not state.is_world_process_zero or not self.console.is_terminal:
            return
        self._progress = Progress(
            TextColumn("[bold]train"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn(
                "loss {task.fields[loss]} · lr {task.fields[lr]} · {task.fields[tps]} tok/s · peak {task.fields[mem]}"
            ),
            TimeRemainingColumn(),
            console=self.console,
        )
        self._progress.start()
        self._task = self._progress.add_task("train", total=state.max_steps, completed=state.global_step)
        self._refresh(state.global_step)

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        """Update tokens/s and peak memory, then the bar."""
        tps = self.metrics.tokens_per_s()
        if tps is not None:
            self._fields["tps"] = f"{tps:,.0f}"
        peak_gib, _, _ = peak_memory()
        self._fields["mem"] = f"{peak_gib:.2f} GiB"
        self._refresh(state.global_step)

    def on_log(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        logs: dict[str, float] | None = None,
        **kwargs: Any,
    ) -> None:
        """Show the logged loss and learning rate: in the bar, or as one plain line when there is none."""
        if not logs or "loss" not in logs or not state.is_world_process_zero:
            return
        self._fields["loss"] = f"{logs['loss']:.4f}"
        if "learning_rate" in logs:
            self._fields["lr"] = f"{logs['learning_rate']:.2e}"
        if self._progress is not None:
            self._refresh(state.global_step)
        else:
            self.console.print(
                f"step {state.global_step}/{state.max_steps} loss {self._fields['loss']} lr {self._fields['lr']} "
                f"{self._fields['tps']} tok/s peak {self._fields['mem']}",
                markup=False,
            )

    def on_evaluate(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        metrics: dict[str, float] | None = None,
        **kwargs: Any,
    ) -> None:
        """Print the eval loss as one line (main process)."""
        if metrics and "eval_loss" in metrics and state.is_world_process_zero:
            self.console.print(f"eval loss {float(metrics['eval_loss']):.4f} at step {state.global_step}", markup=False)

    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        """Stop the live display."""
        self.stop()

    def _refresh(self, step: int) -> None:
        if self._progress is None:
            return
        fields = self._fields
        self._progress.update(
            self._task, completed=step, loss=fields["loss"], lr=fields["lr"], tps=fields["tps"], mem=fields["mem"]
        )

    def stop(self) -> None:
        """Stop the live display (also called when training raises)."""
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


class StopOnSignalCallback(TrainerCallback):
    """On SIGINT / SIGTERM: finish the current optimizer step, save a checkpoint, stop training.

    The handlers only set a flag; at each step end the flag is agreed over all ranks (an all-reduce of
    one int, so every rank stops at the same step and saves together), then Trainer saves and stops.
    The previous handlers are restored by :meth:`restore`.
    """

    def __init__(self) -> None:
        """Start with no signal received and no handlers installed."""
        self.requested: int | None = None  # signal number
        self.stopped = False
        self._previous: dict[int, Any] = {}

    def install(self) -> None:
        """Install the handlers (main thread only)."""
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, self._handle)

    def restore(self) -> None:
        """Put back the handlers that were there before :meth:`install`."""
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.requested = signum

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        """Save and stop training when any rank received a signal."""
        if self._agreed_stop():
            control.should_save = True
            control.should_training_stop = True
            self.stopped = True

    def _agreed_stop(self) -> bool:
        local = self.requested is not None
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            flag = torch.tensor([1 if local else 0], dtype=torch.int32)
            if torch.distributed.get_backend() == "nccl":
                flag = flag.cuda()
            torch.distributed.all_reduce(flag, op=torch.distributed.ReduceOp.MAX)
            return bool(flag.item())
        return local

    @property
    def signal_name(self) -> str:
        """Name of the signal received, e.g. 'SIGTERM' (empty if none)."""
        return signal.Signals(self.requested).name if self.requested is not None else ""


class StopOnNonFiniteLossCallback(TrainerCallback):
    """Stop training at the first logged loss that is NaN or infinite, without saving that step's checkpoint.

    The Trainer logs the mean loss since the last log (``logging_steps`` optimizer steps), the same value on
    every rank (it is gathered before logging), so every rank stops at the same step. One non-finite micro-step
    makes that mean non-finite only when ``TrainingArguments.logging_nan_inf_filter`` is off (its default,
    on, replaces a NaN/inf step loss by the running average and hides it): :mod:`autotune.trainer.hf_args`
    turns it off. Weights after a non-finite loss are not worth keeping: the step's save is cancelled
    (``on_log`` runs before the Trainer's save check in ``_maybe_log_save_evaluate``) and the caller skips
    the final weights.
    """

    def __init__(self) -> None:
        """Start with no non-finite loss seen."""
        self.bad_loss: float | None = None
        self.bad_step: int | None = None

    @property
    def stopped(self) -> bool:
        """True once a non-finite loss was seen."""
        return self.bad_step is not None

    def on_log(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        logs: dict[str, float] | None = None,
        **kwargs: Any,
    ) -> None:
        """Stop training, without saving this step, at the first logged loss that is NaN or infinite."""
        if self.stopped or not logs or "loss" not in logs:
            return
        loss = float(logs["loss"])
        if math.isfinite(loss):
            return
        self.bad_loss, self.bad_step = loss, state.global_step
        control.should_training_stop = True
        control.should_save = False

    def message(self, learning_rate: float) -> str:
        """One line for the report and the user: the value, the step and what to change."""
        return (
            f"the training loss became {self.bad_loss} at step {self.bad_step}: training stopped, no final weights "
            f"saved (learning rate {learning_rate:g}); lower it with --learning-rate, or use a wider precision"
        )
