"""``run_report.json`` (``trainer/report.py``), built and written in-process: the measured figures next to the plan's.

The contract: the report holds the run's losses and figures from :class:`RunMetrics`, the plan's prediction and
setting, the tokens seen in this invocation, the profiled steps it reached; peak memory of this process (on the CPU
its peak RSS); written whole as indented JSON that reads back as the same report, replacing an older one.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

pytest.importorskip("torch")

import torch
from plans import make_plan

from autotune.schemas.run_report import RunReport
from autotune.trainer.callbacks import RunMetrics
from autotune.trainer.report import build_report, describe_device, max_over_ranks, write_report

PLAN = make_plan()
START = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def _metrics() -> RunMetrics:
    return RunMetrics(
        losses=[2.0, 1.5],
        loss_steps=[1, 2],
        eval_losses=[1.8],
        eval_loss_steps=[2],
        step_times_s=[0.5, 0.7, 0.6],
        tokens_at_start=100,
        tokens_after_first_step=140,
        tokens_at_end=260,
        untimed_steps={9, 3, 2},
    )


def _report(metrics: RunMetrics, **overrides: object) -> RunReport:
    values: dict[str, object] = {
        "plan": PLAN,
        "status": "completed",
        "message": "",
        "steps": 4,
        "max_steps": 4,
        "resumed_from_step": 0,
        "metrics": metrics,
        "world_size": 1,
        "device": "cpu",
        "started_at": START,
        "finished_at": START.replace(minute=10),
        **overrides,
    }
    return build_report(**values)  # type: ignore[arg-type]


def test_the_report_holds_the_runs_measurements_and_the_plans_prediction() -> None:
    metrics = _metrics()
    report = _report(metrics)
    assert (report.losses, report.loss_steps, report.eval_losses, report.eval_loss_steps) == (
        [2.0, 1.5],
        [1, 2],
        [1.8],
        [2],
    )
    assert report.tokens_seen == 160  # this invocation's: 260 at the end - 100 at its start
    assert report.profiled_steps == [2, 3]  # step 9 was never reached
    assert report.step_time_s_measured == metrics.median_step_time_s() == pytest.approx(0.6)
    assert report.prediction == PLAN.prediction and report.setting == PLAN.setting
    assert (report.model, report.gpu, report.model_source) == ("llama3-8b", PLAN.cluster.gpu, PLAN.model_source)
    assert report.memory_kind == "cpu-rss" and report.peak_reserved_gib_measured is None
    assert report.peak_memory_gib_measured > 0  # this process's peak RSS
    assert report.cpu_threads == torch.get_num_threads()


def test_a_failed_run_keeps_its_message_and_never_reports_negative_tokens() -> None:
    metrics = RunMetrics(tokens_at_start=50, tokens_at_end=0)  # failed before the first step counted
    report = _report(metrics, status="failed", message="out of memory", steps=0, reduce_over_ranks=False)
    assert (report.status, report.message, report.tokens_seen) == ("failed", "out of memory", 0)
    assert report.tokens_per_s_measured is None and report.profiled_steps == []


def test_a_gpu_device_records_no_cpu_threads() -> None:
    assert _report(_metrics(), device="cuda:0 (H200)").cpu_threads is None


def test_the_report_is_written_as_json_that_reads_back_the_same_and_replaces_an_older_one(tmp_path: Path) -> None:
    path = tmp_path / "run" / "run_report.json"  # its folder is made
    first = _report(_metrics(), status="interrupted", message="SIGTERM")
    write_report(first, path)
    assert RunReport.model_validate_json(path.read_text()) == first
    second = _report(_metrics())
    write_report(second, path)
    assert json.loads(path.read_text())["status"] == "completed"
    assert path.read_text().endswith("}\n") and "\n  " in path.read_text()  # indented, one final newline
    assert [p.name for p in path.parent.iterdir()] == ["run_report.json"]  # no temporary file left


def test_without_a_process_group_the_maximum_over_ranks_is_the_value_itself() -> None:
    assert not torch.distributed.is_initialized()
    assert max_over_ranks(3.5) == 3.5 and max_over_ranks(None) is None


def test_the_device_is_the_cpu_or_the_current_gpu_by_index_and_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index: f"GPU number {index}")
    assert describe_device(cpu=False) == "cuda:1 (GPU number 1)"
    assert describe_device(cpu=True) == "cpu"  # --cpu with a GPU visible
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert describe_device(cpu=False) == "cpu"
