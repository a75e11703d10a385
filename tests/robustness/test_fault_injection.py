"""kill -9 at 20 seeded random points (micro steps and every part of a checkpoint save), resume each time:
the finished run took every optimizer step exactly once and ends with the uninterrupted run's weights."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from trainer_helpers import build_plan_file, save_tiny_model, text_rows, trainer_env, write_jsonl

HARNESS = Path(__file__).with_name("fault_harness.py")
MAX_STEPS = 24
KILLS = 20
SEED = 20261124


@pytest.mark.slow
def test_kill_nine_at_twenty_points_loses_and_repeats_no_step(tmp_path: Path) -> None:
    model = save_tiny_model(tmp_path / "tiny")
    plan = build_plan_file(
        model, tmp_path / "plan.yaml", method="lora", lora_dropout=0.0, micro_batch_size=2, grad_accum=2
    )
    data = write_jsonl(tmp_path / "text.jsonl", text_rows())
    spec = {
        "argv": [
            "--plan",
            str(plan),
            "--dataset",
            str(data),
            "--cpu",
            "--max-steps",
            str(MAX_STEPS),
            "--save-steps",
            "3",
            "--learning-rate",
            "1e-2",
            "--seed",
            "0",
        ],
        "work_dir": str(tmp_path),
        "seed": SEED,
        "kills": KILLS,
        "max_event": 14,
    }
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    proc = subprocess.run(
        [sys.executable, str(HARNESS), str(tmp_path / "spec.json"), str(tmp_path / "result.json")],
        env=trainer_env(),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads((tmp_path / "result.json").read_text())
    attempts = result["attempts"]
    assert result["kills"] == KILLS, attempts
    assert any(a["outcome"] == "killed" and a["variant"] == "mid" for a in attempts)
    assert result["final"]["code"] == 0, result["final"]["log_tail"]
    steps = [step for step, _ in result["history"]]
    assert steps == list(range(1, MAX_STEPS + 1)), steps  # every optimizer step once, in order
    reference = dict(result["reference_history"])
    for step, loss in result["history"]:
        assert loss == pytest.approx(reference[step], rel=1e-4, abs=1e-5), (step, loss, reference[step])
    assert result["same_weight_names"]
    assert result["max_weight_diff"] < 1e-5
    print(
        f"{result['kills']} kills in {len(attempts)} attempts "
        f"({sum(a['variant'] == 'mid' for a in attempts if a['outcome'] == 'killed')} mid-write), "
        f"{len(result['ignored'])} partial checkpoints set aside, max weight diff {result['max_weight_diff']:.2e}"
    )
