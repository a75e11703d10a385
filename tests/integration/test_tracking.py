"""``launch --report-to`` (issue 26 item 4): transformers' own tracker integrations, refused in one line when the
tracker's package is missing; tensorboard's event files land in the run directory and tensorboard reads them."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
from cli_runner import run
from trainer_helpers import FinishedRun, PlanWriter, instruction_rows, read_report, write_jsonl


def test_tensorboard_event_files_hold_the_logged_losses(finished_lora_run: FinishedRun) -> None:
    """The shared run (tests/integration/conftest.py) logs to tensorboard, with eval."""
    pytest.importorskip("tensorboard")  # in the dev extra: CI runs this
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out = finished_lora_run.output_dir
    files = list((out / "tensorboard").rglob("events.out.tfevents.*"))
    assert files, sorted(str(p) for p in out.rglob("*"))
    events = EventAccumulator(str(files[0].parent))
    events.Reload()
    losses = [event.value for event in events.Scalars("train/loss")]
    report = read_report(out)
    assert losses == pytest.approx(report.losses, rel=1e-6)
    assert [event.value for event in events.Scalars("eval/loss")] == pytest.approx(report.eval_losses, rel=1e-6)


@pytest.mark.parametrize("mode", ["launch", "dry-run"])
def test_a_missing_tracker_is_one_line(
    mode: str,
    write_plan: PlanWriter,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = importlib.util.find_spec

    def without_wandb(name: str, *args: Any) -> Any:
        return None if name == "wandb" else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", without_wandb)
    plan = write_plan(method="lora", micro_batch_size=2, grad_accum=1, precision="fp32")
    data = write_jsonl(tmp_path / "d.jsonl", instruction_rows(8))
    out = tmp_path / "run"
    argv = ["launch", str(plan), "--dataset", str(data), "--output-dir", str(out), "--cpu", "--report-to", "wandb"]
    code, _, err = run(capsys, *argv, *(["--dry-run"] if mode == "dry-run" else []))
    message = '--report-to wandb needs the wandb package, which is not installed here: pip install -e ".[wandb]"'
    if mode == "dry-run":
        assert code == 0 and message in err and "warning" in err.lower(), err
    else:
        assert code == 2 and len(err.strip().splitlines()) == 1 and message in err, err
    assert not out.exists()


def test_an_unknown_tracker_is_one_line(
    write_plan: PlanWriter, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = write_plan(method="lora", micro_batch_size=2, grad_accum=1, precision="fp32")
    data = write_jsonl(tmp_path / "d.jsonl", instruction_rows(8))
    code, _, err = run(capsys, "launch", str(plan), "--dataset", str(data), "--output-dir", str(tmp_path / "run"),
                       "--cpu", "--report-to", "comet")  # fmt: skip
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--report-to" in err, err
