"""A launch checks dataset, model and environment before anything is written (also with --dry-run)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cli_runner import run

from autotune.launcher import preflight

from .conftest import replayed_gpu_probe, torch_sees_a_gpu

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "configs" / "llama3.2-1b"


def _plan(capsys, tmp_path: Path, model: str = "llama3.2-1b") -> Path:
    path = tmp_path / "plan.yaml"
    code, _, err = run(capsys, "plan", model, "--gpu", "4090", "--seq-len", "512", "-o", str(path))
    assert code == 0, err
    return path


def _chat(tmp_path: Path) -> Path:
    data = tmp_path / "chat.jsonl"
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    data.write_text(json.dumps({"messages": messages}) + "\n")
    return data


def _launch(capsys, plan: Path, dataset: str, out: Path, *extra: str) -> tuple[int, str]:
    code, _, err = run(capsys, "launch", str(plan), "--dataset", dataset, "--output-dir", str(out), "--cpu", *extra)
    return code, err


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "launch"])
def test_missing_dataset_is_refused_before_the_run_directory_exists(capsys, tmp_path: Path, dry_run: bool) -> None:
    plan = _plan(capsys, tmp_path)
    out = tmp_path / "run"
    code, err = _launch(capsys, plan, str(tmp_path / "nope.jsonl"), out, *(["--dry-run"] if dry_run else []))
    assert code == 2 and "not found" in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_columns_the_format_lacks_are_named(capsys, tmp_path: Path) -> None:
    plan = _plan(capsys, tmp_path)
    data = tmp_path / "d.jsonl"
    data.write_text('\n{"prompt": "a", "completion": "b"}\n')
    code, err = _launch(capsys, plan, str(data), tmp_path / "run", "--dry-run")
    assert code == 2 and "'prompt'" in err and "instruction" in err
    code, err = _launch(capsys, plan, str(_chat(tmp_path)), tmp_path / "run", "--dry-run", "--dataset-format", "text")
    assert code == 2 and "missing text" in err
    code, err = _launch(capsys, plan, str(_chat(tmp_path)), tmp_path / "run", "--dry-run")
    assert code == 0


def test_config_only_model_directory_can_be_planned_but_not_launched(capsys, tmp_path: Path) -> None:
    model = tmp_path / "model"
    shutil.copytree(FIXTURE, model)
    plan = _plan(capsys, tmp_path, str(model))
    out = tmp_path / "run"
    code, err = _launch(capsys, plan, str(_chat(tmp_path)), out)
    assert code == 2 and "can be planned but not launched" in err and not out.exists()
    (model / "model.safetensors").write_bytes(b"")
    code, err = _launch(capsys, plan, str(_chat(tmp_path)), out, "--dry-run")
    assert code == 2 and "no tokenizer" in err
    (model / "tokenizer.json").write_text("{}")
    code, err = _launch(capsys, plan, str(_chat(tmp_path)), out, "--dry-run")
    assert code == 0, err


def test_missing_training_stack_refuses_a_launch_and_warns_a_dry_run(
    capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = _plan(capsys, tmp_path)
    real_find_spec = preflight.importlib.util.find_spec
    monkeypatch.setattr(
        preflight.importlib.util, "find_spec", lambda name: None if name == "peft" else real_find_spec(name)
    )
    out = tmp_path / "run"
    code, err = _launch(capsys, plan, str(_chat(tmp_path)), out)
    assert code == 2 and "missing peft" in err and not out.exists()
    code, err = _launch(capsys, plan, str(_chat(tmp_path)), out, "--dry-run")
    assert code == 0 and "warning:" in err and "missing peft" in err


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="needs a machine without a GPU")
@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "launch"])
def test_without_cpu_on_a_machine_without_gpu_the_launch_names_cpu(
    capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dry_run: bool
) -> None:
    monkeypatch.setattr(preflight, "check_gpu_visible", replayed_gpu_probe)
    if torch_sees_a_gpu():
        pytest.skip("torch sees a GPU here")
    plan = _plan(capsys, tmp_path)
    out = tmp_path / "run"
    extra = ["--dry-run"] if dry_run else []
    code, _, err = run(capsys, "launch", str(plan), "--dataset", str(_chat(tmp_path)), "--output-dir", str(out), *extra)
    assert code == 2 and "--cpu" in err and "no GPU" in err and len(err.strip().splitlines()) == 1
    assert not out.exists()
