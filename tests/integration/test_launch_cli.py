"""The user's path end to end: `autotune plan` a model directory, then `autotune launch` it on the CPU."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from trainer_helpers import chat_rows, read_report, run_command, write_jsonl

from autotune.schemas.plan_io import load_plan

AUTOTUNE = [sys.executable, "-c", "from autotune.cli.app import main; main()"]


@pytest.mark.slow
def test_plan_then_launch_on_cpu_trains_and_reports(tiny_model_dir: Path, tmp_path: Path) -> None:
    plan_path = tmp_path / "plan.yaml"
    planned = run_command(
        [
            *AUTOTUNE,
            "plan",
            str(tiny_model_dir),
            "--gpu",
            "4090",
            "--seq-len",
            "32",
            "--global-batch-size",
            "4",
            "--method",
            "lora",
            "--no-compile",
            "--precision",
            "fp32",
            "-o",
            str(plan_path),
        ],
        timeout_s=120,
    )
    assert planned.returncode == 0, planned.stderr
    data = write_jsonl(tmp_path / "chat.jsonl", chat_rows(32))
    out = tmp_path / "run"
    launched = run_command(
        [
            *AUTOTUNE,
            "launch",
            str(plan_path),
            "--dataset",
            str(data),
            "--output-dir",
            str(out),
            "--cpu",
            "--max-steps",
            "4",
            "--learning-rate",
            "1e-3",
        ],
        timeout_s=600,
    )
    assert launched.returncode == 0, launched.stderr[-3000:]
    report = read_report(out)
    assert report.status == "completed" and report.steps == 4
    assert report.setting.method == "lora"
    assert (out / "plan.yaml").is_file() and (out / "final").is_dir()
    assert report.prediction == load_plan(out / "plan.yaml").prediction  # the plan's prediction travels along

    again = run_command(
        [*AUTOTUNE, "launch", str(plan_path), "--dataset", str(data), "--output-dir", str(out), "--cpu"],
        timeout_s=120,
    )
    assert again.returncode == 2
    assert len([line for line in again.stderr.splitlines() if line.strip()]) == 1
