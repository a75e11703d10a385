"""User errors of the training core: one line on stderr, exit code 2, nothing written or changed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from trainer_helpers import PlanWriter, instruction_rows, run_trainer, write_jsonl


def _snapshot(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def _one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error: ")
    return lines[0]


@pytest.mark.slow
def test_existing_run_is_not_overwritten(write_plan: PlanWriter, tmp_path: Path) -> None:
    plan = write_plan(method="lora")
    data = write_jsonl(tmp_path / "instr.jsonl", instruction_rows(8))
    out = tmp_path / "run"
    (out / "checkpoints" / "checkpoint-3").mkdir(parents=True)
    (out / "checkpoints" / "checkpoint-3" / "trainer_state.json").write_text('{"global_step": 3}')
    (out / "run_report.json").write_text(json.dumps({"status": "interrupted"}))
    before = _snapshot(out)
    proc = run_trainer(
        "--plan", str(plan), "--dataset", str(data), "--output-dir", str(out), "--cpu", "--max-steps", "2"
    )
    assert proc.returncode == 2
    line = _one_error_line(proc.stderr)
    assert "already holds a run" in line and "--resume" in line
    assert _snapshot(out) == before


@pytest.mark.slow
def test_dataset_with_wrong_columns_is_refused(write_plan: PlanWriter, tmp_path: Path) -> None:
    plan = write_plan(method="lora")
    data = write_jsonl(tmp_path / "wrong.jsonl", [{"question": "q", "answer": "a"}] * 4)
    out = tmp_path / "run"
    proc = run_trainer(
        "--plan", str(plan), "--dataset", str(data), "--output-dir", str(out), "--cpu", "--max-steps", "2"
    )
    assert proc.returncode == 2
    line = _one_error_line(proc.stderr)
    assert str(data) in line and "answer" in line and "question" in line  # the file and the columns found
    assert "instruction" in line and "messages" in line and "text" in line  # the columns expected
    assert not out.exists()


@pytest.mark.slow
def test_forced_format_names_missing_columns(write_plan: PlanWriter, tmp_path: Path) -> None:
    plan = write_plan(method="lora")
    data = write_jsonl(tmp_path / "instr.jsonl", instruction_rows(4))
    out = tmp_path / "run"
    proc = run_trainer(
        "--plan", str(plan), "--dataset", str(data), "--output-dir", str(out), "--cpu", "--dataset-format", "chat"
    )
    assert proc.returncode == 2
    line = _one_error_line(proc.stderr)
    assert "format chat needs messages" in line and str(data) in line


@pytest.mark.slow
def test_missing_plan_file(tmp_path: Path) -> None:
    proc = run_trainer(
        "--plan", str(tmp_path / "nope.yaml"), "--dataset", "x.jsonl", "--output-dir", str(tmp_path / "o")
    )
    assert proc.returncode == 2
    assert "nope.yaml" in _one_error_line(proc.stderr)


@pytest.mark.slow
def test_ctrl_c_while_loading_is_one_line_and_130(write_plan: PlanWriter, tmp_path: Path) -> None:
    """Issue 29 item 2: SIGINT after the ``dataset`` log line, before training: rc 130 and one ``error:`` line."""
    import signal
    import subprocess
    import sys

    from trainer_helpers import core_args, trainer_env

    data = write_jsonl(tmp_path / "data.jsonl", instruction_rows(64))
    out = tmp_path / "run"
    command = [sys.executable, "-m", "autotune.trainer", *core_args(write_plan(), data, out, 50)]
    child = subprocess.Popen(command, env=trainer_env(), stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    assert child.stderr is not None
    lines: list[str] = []
    try:
        for line in child.stderr:  # the marker: the core logged the dataset and goes on to load the model
            lines.append(line)
            if "autotune" in line and " dataset " in f" {line}":
                child.send_signal(signal.SIGINT)
                break
        lines += child.stderr.readlines()
        code = child.wait(timeout=120)
    finally:
        child.kill()
    errors = [line for line in lines if line.startswith("error:")]
    assert code == 130, "".join(lines)
    assert len(errors) == 1, "".join(lines)
    assert "interrupted before training started" in errors[0]
