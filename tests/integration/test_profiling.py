"""``--profile-steps``: a CPU run of the core records steps with torch.profiler, and its timings leave them out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from trainer_helpers import PlanWriter, core_args, read_report, run_trainer, text_rows, write_jsonl

from autotune.trainer.callbacks import RunMetrics


def test_profiled_steps_are_left_out_of_the_tokens_per_second() -> None:
    # three steps after the first: 100 tokens in 1 s, 1,000 tokens in 50 s (profiled), 100 tokens in 1 s
    metrics = RunMetrics(tokens_after_first_step=100, tokens_at_end=1300, untimed_steps={3}, untimed_tokens=1000)
    metrics.step_times_s = [1.0, 1.0]
    assert metrics.tokens_per_s() == pytest.approx(100.0)


@pytest.mark.slow
def test_a_profiled_run_writes_a_trace_and_an_ops_table_and_times_the_other_steps(
    write_plan: PlanWriter, tmp_path: Path
) -> None:
    plan = write_plan(method="lora", micro_batch_size=2)
    data = write_jsonl(tmp_path / "text.jsonl", text_rows(32))
    out = tmp_path / "run"
    proc = run_trainer(*core_args(plan, data, out, max_steps=4), "--profile-steps", "2")
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = read_report(out)
    assert report.profiled_steps == [2, 3]
    assert report.status == "completed" and report.steps == 4
    trace = json.loads((out / "profile" / "trace-rank0-steps2-3.json").read_text())
    assert any(event.get("name", "").startswith("aten::") for event in trace["traceEvents"])
    table = (out / "profile" / "ops-rank0-steps2-3.txt").read_text()
    assert "Self CPU" in table and "aten::" in table
    assert report.step_time_s_measured is not None  # step 4, the one step timed (1 is the warm-up)
    assert report.tokens_per_s_measured is not None and report.tokens_per_s_measured > 0
