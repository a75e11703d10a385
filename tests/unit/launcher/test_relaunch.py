"""A relaunch on a node follows `autotune launch`: a run that never trained starts again, one that did resumes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from autotune.launcher.relaunch import main, relaunch_argument


def _run_dir(tmp_path: Path) -> Path:
    out = tmp_path / "run"
    out.mkdir(parents=True)
    (out / "plan.yaml").write_text("plan\n")
    return out


def test_a_missing_directory_starts_a_new_run(tmp_path: Path) -> None:
    assert relaunch_argument(tmp_path / "absent") == ""
    assert not (tmp_path / "absent").exists()


def test_a_run_that_never_trained_starts_again_and_keeps_its_report(tmp_path: Path) -> None:
    out = _run_dir(tmp_path)
    (out / "run_report.json").write_text('{"status": "failed"}')
    (out / "checkpoints").mkdir()  # a checkpoints folder with no checkpoint in it
    assert relaunch_argument(out) == ""
    assert (out / "run_report.1.json").read_text() == '{"status": "failed"}'


def test_a_run_with_a_checkpoint_or_a_completed_report_is_resumed(tmp_path: Path) -> None:
    out = _run_dir(tmp_path)
    (out / "checkpoints" / "checkpoint-4").mkdir(parents=True)
    assert relaunch_argument(out) == "--resume"
    done = _run_dir(tmp_path / "done")
    (done / "run_report.json").write_text('{"status": "completed"}')
    assert relaunch_argument(done) == "--resume"  # the training core then refuses it: "already completed"
    assert (done / "run_report.json").exists()


def test_the_module_prints_the_argument_and_refuses_bad_use(tmp_path: Path) -> None:
    out = _run_dir(tmp_path)
    (out / "checkpoints" / "checkpoint-4").mkdir(parents=True)
    proc = subprocess.run(
        [sys.executable, "-m", "autotune.launcher.relaunch", str(out)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0 and proc.stdout == "--resume\n"
    assert main([]) == 2
