"""The real training core on broken run directories: completed, corrupt newest checkpoint, edited plan,
another model's plan, a directory in use. Each is refused with one line or continues correctly."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from trainer_helpers import (
    build_plan_file,
    core_args,
    read_report,
    run_trainer,
    save_tiny_model,
    text_rows,
    write_jsonl,
)

from autotune import run_lock
from autotune.schemas.plan_io import load_plan, save_plan

MAX_STEPS = 6


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One completed LoRA run (checkpoints at steps 4 and 6) with its plan, data and model."""
    root = tmp_path_factory.mktemp("faults")
    model = save_tiny_model(root / "tiny")
    plan = build_plan_file(model, root / "plan.yaml", method="lora", lora_dropout=0.0, micro_batch_size=2)
    data = write_jsonl(root / "text.jsonl", text_rows(32))
    out = root / "run"
    proc = run_trainer(*core_args(plan, data, out, MAX_STEPS), "--save-steps", "2")
    assert proc.returncode == 0, proc.stderr
    return {"model": model, "plan": plan, "data": data, "out": out, "root": root}


def _copy(run: dict[str, Path], name: str) -> Path:
    target = run["root"] / name
    shutil.copytree(run["out"], target)
    return target


def _one_line_error(stderr: str) -> str:
    lines = [line for line in stderr.strip().splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


@pytest.mark.slow
def test_resume_of_completed_run_refused_and_report_kept(finished_run: dict[str, Path]) -> None:
    report = finished_run["out"] / "run_report.json"
    before = report.read_bytes()
    proc = run_trainer(
        *core_args(finished_run["plan"], finished_run["data"], finished_run["out"], MAX_STEPS), "--resume"
    )
    assert proc.returncode == 2
    assert "already completed" in _one_line_error(proc.stderr)
    assert report.read_bytes() == before


@pytest.mark.slow
def test_corrupt_newest_checkpoint_skipped_and_said(finished_run: dict[str, Path]) -> None:
    out = _copy(finished_run, "corrupt")
    (out / "run_report.json").unlink()  # as after a kill -9 during the last save
    weights = out / "checkpoints" / f"checkpoint-{MAX_STEPS}" / "adapter_model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    proc = run_trainer(*core_args(finished_run["plan"], finished_run["data"], out, MAX_STEPS), "--resume")
    assert proc.returncode == 0, proc.stderr
    assert f"skipped checkpoint checkpoint-{MAX_STEPS}" in proc.stderr
    report = read_report(out)
    assert report.status == "completed" and report.resumed_from_step == MAX_STEPS - 2 and report.steps == MAX_STEPS
    assert report.loss_steps == list(range(1, MAX_STEPS + 1))  # the whole run: the steps before the resume too
    assert (out / "checkpoints" / "ignored" / f"checkpoint-{MAX_STEPS}").is_dir()


@pytest.mark.slow
def test_edited_plan_refused_before_training(finished_run: dict[str, Path]) -> None:
    out = _copy(finished_run, "edited")
    (out / "run_report.json").unlink()
    plan = load_plan(finished_run["plan"])
    edited = plan.model_copy(update={"setting": plan.setting.model_copy(update={"lora_rank": 8})})
    edited_path = save_plan(edited, finished_run["root"] / "edited.yaml")
    proc = run_trainer(*core_args(edited_path, finished_run["data"], out, MAX_STEPS), "--resume")
    assert proc.returncode == 2
    assert "setting.lora_rank 16 → 8" in _one_line_error(proc.stderr)
    assert not (out / "run_report.json").exists()


@pytest.mark.slow
def test_plan_for_another_architecture_refused(finished_run: dict[str, Path], tmp_path: Path) -> None:
    plan = load_plan(finished_run["plan"])
    other = plan.model_copy(update={"model": plan.model.model_copy(update={"hidden_size": 4096})})
    path = save_plan(other, tmp_path / "other.yaml")
    out = tmp_path / "run"
    proc = run_trainer(*core_args(path, finished_run["data"], out, MAX_STEPS))
    assert proc.returncode == 2
    assert "hidden_size 4096 planned, 64 loaded" in _one_line_error(proc.stderr)
    assert not (out / "run_report.json").exists()


@pytest.mark.slow
def test_directory_in_use_refused(finished_run: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "busy"
    lock = run_lock.acquire(out)
    try:
        proc = run_trainer(*core_args(finished_run["plan"], finished_run["data"], out, MAX_STEPS))
    finally:
        lock.release()
    assert proc.returncode == 2
    assert "in use by pid" in _one_line_error(proc.stderr)
    assert sorted(p.name for p in out.iterdir()) == []


@pytest.mark.slow
def test_all_empty_dataset_refused(finished_run: dict[str, Path], tmp_path: Path) -> None:
    data = tmp_path / "empty.jsonl"
    data.write_text("".join(json.dumps({"text": ""}) + "\n" for _ in range(8)))
    proc = run_trainer(*core_args(finished_run["plan"], data, tmp_path / "run", MAX_STEPS))
    assert proc.returncode == 2
    assert "nothing to learn" in _one_line_error(proc.stderr)


@pytest.mark.slow
def test_two_process_run_publishes_checkpoints_and_resumes(finished_run: dict[str, Path], tmp_path: Path) -> None:
    """Every rank writes under .staging; rank 0 publishes after a barrier; the run resumes from it."""
    from trainer_helpers import run_torchrun

    plan = build_plan_file(
        finished_run["model"], tmp_path / "ddp.yaml", num_gpus=2, method="lora", sharding="ddp", micro_batch_size=2
    )
    out = tmp_path / "run"
    first = run_torchrun(*core_args(plan, finished_run["data"], out, 2), "--save-steps", "1")
    assert first.returncode == 0, first.stderr[-3000:]
    assert [p.name for p in sorted((out / "checkpoints").glob("checkpoint-*"))] == ["checkpoint-1", "checkpoint-2"]
    assert not (out / "checkpoints" / ".staging").exists()  # published and removed
    (out / "run_report.json").unlink()  # as if stopped after the save at step 2
    second = run_torchrun(*core_args(plan, finished_run["data"], out, 3), "--save-steps", "1", "--resume")
    assert second.returncode == 0, second.stderr[-3000:]
    report = read_report(out)
    assert report.status == "completed" and report.resumed_from_step == 2 and report.loss_steps == [1, 2, 3]


def _wait_until_loading(proc: Any, library: str = "libtorch", timeout_s: float = 120) -> None:
    """Wait for the marker "the trainer is loading the training stack": ``library`` mapped into the process
    (``/proc/PID/maps``; torch is imported inside the entry point's Ctrl-C handling, long before training)."""
    import time

    deadline = time.monotonic() + timeout_s
    maps = Path(f"/proc/{proc.pid}/maps")
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the trainer ended before it loaded the training stack"
        try:
            if library in maps.read_text():
                return
        except OSError:
            pass
        time.sleep(0.01)  # polling the marker, not a timed wait
    raise AssertionError(f"{library} was never loaded")


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="the marker is read from /proc")
def test_ctrl_c_while_loading_is_one_line(finished_run: dict[str, Path], tmp_path: Path) -> None:
    """SIGINT during imports / model load: one line, exit 130, nothing left behind (no traceback)."""
    import signal
    import subprocess
    import sys

    from trainer_helpers import trainer_env

    out = tmp_path / "run"
    argv = core_args(finished_run["plan"], finished_run["data"], out, MAX_STEPS)
    proc = subprocess.Popen(
        [sys.executable, "-m", "autotune.trainer", *argv], stderr=subprocess.PIPE, text=True, env=trainer_env()
    )
    _wait_until_loading(proc)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert "Traceback" not in stderr, stderr
    assert proc.returncode == 130  # SIGINT: 128 + 2, before and during training
    if "interrupted before training started" in stderr:
        assert "interrupted before training started" in _one_line_error(stderr)
        assert not (out / "checkpoints").exists()
    else:  # a fast machine reached training: the signal callback saved and stopped
        assert read_report(out).status == "interrupted"


@pytest.mark.slow
def test_a_broken_json_line_is_one_line_naming_it(finished_run: dict[str, Path], tmp_path: Path) -> None:
    """Issue 19 item 6: three lines (one a datasets log line) naming row 1 for a break on line 2; now the core
    reads the file line by line before datasets does."""
    data = tmp_path / "broken.jsonl"
    data.write_text('{"text": "a b c"}\n{"text": "d e f"\n{"text": "g h i"}\n')
    out = tmp_path / "run"
    proc = run_trainer(*core_args(finished_run["plan"], data, out, MAX_STEPS))
    assert proc.returncode == 2
    assert f"dataset {data} line 2: not valid JSON" in _one_line_error(proc.stderr)
    assert [line for line in proc.stderr.splitlines() if line.strip()] == [_one_line_error(proc.stderr)]
    assert not out.exists()
