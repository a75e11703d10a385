"""A run stopped by a signal saves a checkpoint; --resume continues it with no lost or repeated step."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from trainer_helpers import PlanWriter, core_args, mean, read_report, run_trainer, text_rows, trainer_env, write_jsonl

MAX_STEPS = 40
STOP_AFTER = 8


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_interrupt_then_resume(write_plan: PlanWriter, tmp_path: Path, sig: signal.Signals) -> None:
    plan = write_plan(method="lora", lora_dropout=0.0, micro_batch_size=2, grad_accum=2)
    data = write_jsonl(tmp_path / "text.jsonl", text_rows())
    out = tmp_path / "run"
    argv = [
        *core_args(plan, data, out, MAX_STEPS),
        "--save-steps",
        "5",
        "--learning-rate",
        "1e-2",
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "autotune.trainer", *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=trainer_env(),
    )
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        seen.append(line)
        match = re.match(r"step (\d+)/", line)
        if match and int(match.group(1)) >= STOP_AFTER:
            proc.send_signal(sig)
            break
    rest = proc.stderr.read()
    assert proc.wait(timeout=120) == 128 + sig, "".join(seen) + rest  # 130 / 143: interrupted, not completed

    first = read_report(out)
    assert first.status == "interrupted" and sig.name in first.message
    assert STOP_AFTER <= first.steps < MAX_STEPS
    assert (out / "checkpoints" / f"checkpoint-{first.steps}").is_dir()  # saved at the stop, not at step 5 or 10
    assert not (out / "final").exists()

    resumed = run_trainer(*argv, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    second = read_report(out)
    assert second.status == "completed"
    assert second.steps == MAX_STEPS
    assert second.resumed_from_step == first.steps
    assert second.loss_steps == list(range(first.steps + 1, MAX_STEPS + 1))  # no step lost or repeated
    assert first.loss_steps == list(range(1, first.steps + 1))
    # The loss continues from where it was, well below where the fresh run started.
    assert mean(second.losses[:3]) < mean(first.losses[:3]) - 0.3
    assert (out / "final" / "adapter_config.json").is_file()


@pytest.mark.slow
def test_resume_without_checkpoint_is_refused(write_plan: PlanWriter, tmp_path: Path) -> None:
    plan = write_plan(method="lora")
    data = write_jsonl(tmp_path / "text.jsonl", text_rows(8))
    out = tmp_path / "run"
    out.mkdir()
    proc = run_trainer("--plan", str(plan), "--dataset", str(data), "--output-dir", str(out), "--cpu", "--resume")
    assert proc.returncode == 2
    assert "no checkpoint" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
