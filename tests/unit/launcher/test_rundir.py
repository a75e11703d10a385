"""A run directory that never trained can be started again; one that did cannot."""

from __future__ import annotations

import json
from pathlib import Path

from autotune.launcher.rundir import never_trained, set_aside_report


def test_only_launcher_files_and_a_failed_report_never_trained(tmp_path: Path) -> None:
    (tmp_path / "plan.yaml").write_text("x")
    assert never_trained(tmp_path)
    (tmp_path / "run_report.json").write_text(json.dumps({"status": "failed", "steps": 0}))
    (tmp_path / "checkpoints" / ".staging" / "checkpoint-2").mkdir(parents=True)  # a save that did not finish
    assert never_trained(tmp_path)


def test_a_checkpoint_final_weights_or_a_completed_report_mean_it_trained(tmp_path: Path) -> None:
    (tmp_path / "plan.yaml").write_text("x")
    (tmp_path / "checkpoints" / "checkpoint-4").mkdir(parents=True)
    assert not never_trained(tmp_path)
    other = tmp_path / "b"
    (other / "final").mkdir(parents=True)
    (other / "plan.yaml").write_text("x")
    assert not never_trained(other)
    done = tmp_path / "c"
    done.mkdir()
    (done / "plan.yaml").write_text("x")
    (done / "run_report.json").write_text(json.dumps({"status": "completed"}))
    assert not never_trained(done)


def test_a_directory_the_launcher_did_not_write_is_not_a_run(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    assert not never_trained(tmp_path)


def test_a_previous_report_is_kept_under_a_free_name(tmp_path: Path) -> None:
    assert set_aside_report(tmp_path) is None
    for expected in ("run_report.1.json", "run_report.2.json"):
        (tmp_path / "run_report.json").write_text("{}")
        assert set_aside_report(tmp_path) == tmp_path / expected
    assert not (tmp_path / "run_report.json").exists()
