"""The plan's default training recipe learns on the CPU (issue 21): full fine-tuning at its 2e-5 and LoRA at its
2e-4, cosine after a 3 % warm-up, no --learning-rate given. fp32 plans (the CPU has no fast bf16).

Measured here (torch 2.13 CPU, seed 0; the run is deterministic): full 3.4805 → 3.3648 (0.967), LoRA 3.4760 → 3.2506
(0.935), first-5 vs last-5 mean of 40 steps; the bounds leave a margin below 1 (no learning) and above those."""

from __future__ import annotations

from pathlib import Path

import pytest
from trainer_helpers import PlanWriter, core_args, mean, read_report, run_trainer, text_rows, write_jsonl

from autotune.schemas.plan_io import load_plan
from autotune.schemas.recipe import default_recipe

STEPS = 40


@pytest.mark.slow
@pytest.mark.parametrize(("method", "fraction"), [("full", 0.98), ("lora", 0.96)])
def test_default_recipe_learns(write_plan: PlanWriter, tmp_path: Path, method: str, fraction: float) -> None:
    plan = write_plan(method=method, micro_batch_size=4, lora_dropout=0.0)
    assert load_plan(plan).training == default_recipe(method)  # what runs is the method's recipe
    data = write_jsonl(tmp_path / "text.jsonl", text_rows())
    out = tmp_path / "run"
    proc = run_trainer(*core_args(plan, data, out, STEPS), "--save-steps", "1000")
    assert proc.returncode == 0, proc.stderr
    report = read_report(out)
    assert report.status == "completed" and len(report.losses) == STEPS
    first, last = mean(report.losses[:5]), mean(report.losses[-5:])
    print(f"{method}: first-5 mean {first:.4f}, last-5 mean {last:.4f} ({last / first:.3f})")
    assert last < fraction * first, f"{method}: loss did not fall: first {first:.4f}, last {last:.4f}"
