"""A launch that stopped before training leaves a directory the same command can start again."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_runner import run
from plans import make_plan

from autotune.cli import launch_cmd
from autotune.launcher import LaunchSpec, run_launch
from autotune.schemas.plan_io import save_plan


@pytest.fixture
def trainer_exits(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The real runner with the trainer replaced by ``python -c 'exit(CODE)'``; records each spec's argv."""
    codes: list[int] = []
    seen: list[list[str]] = []

    def fake(spec: LaunchSpec, output_dir: Any, **kwargs: Any) -> int:
        seen.append(list(spec.argv))
        swapped = spec.model_copy(update={"argv": ["python", "-c", f"raise SystemExit({codes.pop(0)})"]})
        return run_launch(swapped, output_dir, **kwargs)

    monkeypatch.setattr(launch_cmd, "run_launch", fake)
    return [codes, seen]


def _args(tmp_path: Path) -> list[str]:
    plan = save_plan(make_plan(), tmp_path / "plan.yaml")
    data = tmp_path / "d.jsonl"
    data.write_text('{"text": "x"}\n')
    return ["launch", str(plan), "--dataset", str(data), "--output-dir", str(tmp_path / "run"), "--cpu"]


def test_the_same_command_starts_a_run_that_never_trained(capsys, tmp_path: Path, trainer_exits: list[Any]) -> None:
    codes, _ = trainer_exits
    args = _args(tmp_path)
    codes += [2, 0]
    assert run(capsys, *args)[0] == 2  # the core refused after the directory was written
    out = tmp_path / "run"
    assert (out / "plan.yaml").is_file()
    (out / "run_report.json").write_text(json.dumps({"status": "failed", "steps": 0}))
    code, _, err = run(capsys, *args)
    assert code == 0, err
    assert "never trained" in err and "run_report.1.json" in err
    assert json.loads((out / "run_report.1.json").read_text())["status"] == "failed"  # kept, not deleted


def test_resume_of_a_run_that_never_trained_starts_it(capsys, tmp_path: Path, trainer_exits: list[Any]) -> None:
    codes, seen = trainer_exits
    args = _args(tmp_path)
    codes += [2, 0]
    run(capsys, *args)
    code, _, err = run(capsys, *args, "--resume")
    assert code == 0, err
    assert "--resume" not in seen[-1]


def test_a_run_with_a_checkpoint_is_still_refused_without_resume(
    capsys, tmp_path: Path, trainer_exits: list[Any]
) -> None:
    codes, _ = trainer_exits
    args = _args(tmp_path)
    codes += [2]
    run(capsys, *args)
    (tmp_path / "run" / "checkpoints" / "checkpoint-5").mkdir(parents=True)
    code, _, err = run(capsys, *args)
    assert code == 2 and "already exists" in err and "--resume" in err


def test_a_directory_holding_another_plan_is_not_restarted(capsys, tmp_path: Path, trainer_exits: list[Any]) -> None:
    codes, _ = trainer_exits
    args = _args(tmp_path)
    codes += [2]
    run(capsys, *args)
    code, _, err = run(capsys, *args, "--set", "micro_batch_size=2")
    assert code == 2 and "never trained" in err and "plan.yaml" in err and len(err.strip().splitlines()) <= 2
