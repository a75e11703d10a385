"""The run's measured throughput (autotune.trainer.callbacks.RunMetrics / MetricsCallback)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("transformers")

from autotune.trainer import callbacks
from autotune.trainer.callbacks import MetricsCallback, RunMetrics


def test_tokens_per_s_is_the_timed_steps_tokens_over_their_time_not_over_the_median_step(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Padded batches: steps of different lengths. Four steps; the first (untimed) sees 50 tokens, then 100 in 1 s,
    100 in 1 s and 400 in 4 s: 600 tokens in 6 s = 100 tokens/s (by the median step, 1 s, it read 200)."""
    clock = iter([10.0, 11.0, 12.0, 16.0])  # the step ends; the first one starts the timing
    monkeypatch.setattr(callbacks.time, "perf_counter", lambda: next(clock))
    metrics = RunMetrics()
    callback = MetricsCallback(metrics, grad_accum=1)
    state = SimpleNamespace(global_step=0, num_input_tokens_seen=0)
    unused: Any = None
    callback.on_train_begin(unused, state, unused)  # type: ignore[arg-type]
    for step, seen in enumerate([50, 150, 250, 650], start=1):
        state.global_step, state.num_input_tokens_seen = step, seen
        callback.on_step_end(unused, state, unused)  # type: ignore[arg-type]
    assert metrics.step_times_s == [1.0, 1.0, 4.0]
    assert metrics.tokens_per_s() == pytest.approx(100.0)
    assert metrics.median_step_time_s() == 1.0


def test_no_throughput_before_a_timed_step() -> None:
    assert RunMetrics(tokens_at_end=100).tokens_per_s() is None


def test_a_profiled_step_and_what_follows_it_are_left_out_of_the_timings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Steps 1..4, step 3 profiled (slow, then a trace export before step 4 begins): the timed steps are 2 and 4,
    each 1 s and 100 tokens; step 3's 1,000 tokens and 50 s, and the 30 s export, are in no figure."""
    clock = iter([0.0, 10.0, 10.0, 11.0, 11.0, 61.0, 91.0, 92.0])  # (begin, end) of each step; 30 s export before 4
    monkeypatch.setattr(callbacks.time, "perf_counter", lambda: next(clock))
    metrics = RunMetrics(untimed_steps={3})
    callback = MetricsCallback(metrics, grad_accum=1)
    state = SimpleNamespace(global_step=0, num_input_tokens_seen=0)
    unused: Any = None
    callback.on_train_begin(unused, state, unused)  # type: ignore[arg-type]
    for step, seen in enumerate([50, 150, 1150, 1250], start=1):
        callback.on_step_begin(unused, state, unused)  # type: ignore[arg-type]
        state.global_step, state.num_input_tokens_seen = step, seen
        callback.on_step_end(unused, state, unused)  # type: ignore[arg-type]
    assert metrics.step_times_s == [1.0, 1.0]
    assert metrics.untimed_tokens == 1000
    assert metrics.tokens_per_s() == pytest.approx(100.0)


def test_a_resumed_runs_metrics_start_with_the_checkpoints_history(tmp_path: Any) -> None:
    """The losses logged before the resume come from the checkpoint's trainer_state.json (issue 41 item 6)."""
    import json

    checkpoint = tmp_path / "checkpoint-4"
    checkpoint.mkdir()
    history = [
        {"loss": 2.5, "step": 1, "epoch": 0.1},
        {"loss": float("nan"), "step": 2},  # JSON's NaN: not finite, left out as the callback leaves it out
        {"loss": 2.25, "step": 3},
        {"eval_loss": 2.4, "step": 3},
        {"loss": 2.0, "step": 4},
        {"loss": 1.0, "step": 6},  # beyond the checkpoint's step: not part of this checkpoint's run
        {"train_loss": 2.2, "step": 4},  # the Trainer's end-of-train summary: not a logged step loss
    ]
    (checkpoint / "trainer_state.json").write_text(json.dumps({"global_step": 4, "log_history": history}))
    metrics = RunMetrics()
    metrics.restore_history(checkpoint)
    assert metrics.loss_steps == [1, 3, 4] and metrics.losses == [2.5, 2.25, 2.0]
    assert metrics.eval_loss_steps == [3] and metrics.eval_losses == [2.4]
    empty = RunMetrics()
    empty.restore_history(tmp_path / "missing")  # unreadable: nothing added
    assert empty.losses == [] and empty.loss_steps == []
