"""--slurm writes the batch script always, submits it only with --submit, and runs this interpreter."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from cli_runner import run


@pytest.fixture
def plan_and_data(capsys, tmp_path: Path) -> tuple[Path, Path]:
    plan = tmp_path / "plan.yaml"
    code, _, _ = run(
        capsys, "plan", "llama3-8b", "--gpu", "h100", "--num-gpus", "8", "--num-nodes", "2", "-o", str(plan)
    )
    assert code == 0
    data = tmp_path / "d.jsonl"
    data.write_text('{"text": "x"}\n')
    return plan, data


def _without_sbatch(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))


def test_slurm_writes_the_script_without_submitting(
    capsys, tmp_path: Path, plan_and_data: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    plan, data = plan_and_data
    _without_sbatch(monkeypatch, tmp_path)
    out = tmp_path / "run"
    code, stdout, err = run(capsys, "launch", str(plan), "--dataset", str(data), "--output-dir", str(out), "--slurm")
    assert code == 0, err
    script = (out / "launch.sbatch").read_text()
    assert (out / "plan.yaml").is_file()
    assert f"sbatch {out / 'launch.sbatch'}" in stdout and "not submitted" in stdout
    assert f"{sys.executable} -m " in script  # the interpreter that planned it, not a bare `python`
    assert f"export PATH={os.path.dirname(sys.executable)}:" in script


def test_submit_without_sbatch_is_refused_before_writing(
    capsys, tmp_path: Path, plan_and_data: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    plan, data = plan_and_data
    _without_sbatch(monkeypatch, tmp_path)
    out = tmp_path / "run"
    args = ["launch", str(plan), "--dataset", str(data), "--output-dir", str(out)]
    code, _, err = run(capsys, *args, "--slurm", "--submit")
    assert code == 2 and "sbatch" in err and len(err.strip().splitlines()) == 1 and not out.exists()
    code, _, err = run(capsys, *args, "--submit")
    assert code == 2 and "add --slurm" in err


def test_submit_runs_sbatch_on_the_script(
    capsys, tmp_path: Path, plan_and_data: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    plan, data = plan_and_data
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    marker = tmp_path / "submitted"
    sbatch = bin_dir / "sbatch"
    sbatch.write_text(f'#!/bin/sh\necho "$1" > {marker}\n')
    sbatch.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    out = tmp_path / "run"
    code, _, err = run(
        capsys, "launch", str(plan), "--dataset", str(data), "--output-dir", str(out), "--slurm", "--submit"
    )
    assert code == 0, err
    assert marker.read_text().strip() == str(out / "launch.sbatch")
