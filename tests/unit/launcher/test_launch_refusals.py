"""Every check that needs no run directory runs before one is created, in a launch and a dry run alike; a refused
launch or ``--resume`` leaves the file system exactly as it was (issue 19, items 3 to 5)."""

from __future__ import annotations

import hashlib
import importlib.util
import os
from pathlib import Path
from typing import Any

import pytest
from cli_runner import run
from plans import make_plan
from tests.hub_cache import add_cached_model

from autotune import run_lock
from autotune.cli import launch_cmd
from autotune.launcher import LaunchSpec, preflight
from autotune.schemas.plan_io import save_plan

HUB_MODEL = "meta-llama/Meta-Llama-3-8B"

MODES = {"dry-run": ["--dry-run"], "launch": [], "resume": ["--resume"]}


def snapshot(root: Path) -> dict[str, Any]:
    """Every entry under ``root``: its kind, and a file's size, mtime and content hash."""
    state: dict[str, Any] = {}
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        if path.is_file():
            state[str(path)] = ("file", info.st_size, info.st_mtime_ns, hashlib.sha256(path.read_bytes()).hexdigest())
        else:
            state[str(path)] = ("dir", info.st_mtime_ns)
    return state


@pytest.fixture
def no_run(monkeypatch: pytest.MonkeyPatch) -> list[LaunchSpec]:
    """Nothing is ever started: the runner is replaced by a recorder (a test that reaches it fails its asserts)."""
    started: list[LaunchSpec] = []

    def record(spec: LaunchSpec, *_: Any, **__: Any) -> int:
        started.append(spec)
        return 0

    monkeypatch.setattr(launch_cmd, "run_launch", record)
    return started


def _data(tmp_path: Path, content: str = '{"text": "x"}\n') -> Path:
    data = tmp_path / "d.jsonl"
    data.write_text(content)
    return data


def _launch(capsys: pytest.CaptureFixture[str], plan: Path, data: Path, out: Path, *extra: str) -> tuple[int, str]:
    code, _, err = run(capsys, "launch", str(plan), "--dataset", str(data), "--output-dir", str(out), *extra)
    return code, err


def _one_error(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), err
    return lines[0]


def _make_empty(out: Path) -> None:
    out.mkdir()


def _make_user_files(out: Path) -> None:
    out.mkdir()
    (out / "notes.txt").write_text("mine")


def _make_regular_file(out: Path) -> None:
    out.write_text("a file")


OUTPUT_STATES = {
    "empty-dir": (_make_empty, "is empty"),
    "user-files": (_make_user_files, "not an autotune run"),
    "regular-file": (_make_regular_file, "is a file, not a directory"),
}


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("state", list(OUTPUT_STATES))
def test_an_output_dir_that_is_not_a_new_or_resumable_run_is_refused_in_every_mode(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, no_run: list[LaunchSpec], state: str, mode: str
) -> None:
    make, expected = OUTPUT_STATES[state]
    plan = save_plan(make_plan(), tmp_path / "plan.yaml")
    out = tmp_path / "run"
    make(out)
    data = _data(tmp_path)
    before = snapshot(tmp_path)
    code, err = _launch(capsys, plan, data, out, "--cpu", *MODES[mode])
    assert code == 2 and expected in _one_error(err)
    assert snapshot(tmp_path) == before and no_run == []


@pytest.mark.parametrize("mode", list(MODES))
def test_a_live_locked_run_is_refused_in_every_mode(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, no_run: list[LaunchSpec], mode: str
) -> None:
    plan = save_plan(make_plan(), tmp_path / "plan.yaml")
    out = tmp_path / "run"
    (out / "checkpoints" / "checkpoint-2").mkdir(parents=True)
    (out / "plan.yaml").write_bytes(plan.read_bytes())
    data = _data(tmp_path)
    lock = run_lock.acquire(out)
    try:
        before = snapshot(tmp_path)
        code, err = _launch(capsys, plan, data, out, "--cpu", *MODES[mode])
        assert code == 2 and "is in use by pid" in _one_error(err)
        assert snapshot(tmp_path) == before and no_run == []
    finally:
        lock.release()


def test_a_refused_resume_never_writes_into_a_folder_that_was_not_a_run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, no_run: list[LaunchSpec]
) -> None:
    """Issue 19 item 4: the refused --resume used to leave plan.yaml there, and the same command then trained."""
    plan = save_plan(make_plan(), tmp_path / "plan.yaml")
    out = tmp_path / "my-folder"
    _make_user_files(out)
    data = _data(tmp_path)
    before = snapshot(tmp_path)
    for _ in range(2):
        code, err = _launch(capsys, plan, data, out, "--cpu", "--resume")
        assert code == 2 and "nothing to resume" in _one_error(err)
    assert snapshot(tmp_path) == before and not (out / "plan.yaml").exists() and no_run == []


def test_resume_of_a_completed_run_is_refused_before_writing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, no_run: list[LaunchSpec]
) -> None:
    plan = save_plan(make_plan(), tmp_path / "plan.yaml")
    out = tmp_path / "run"
    (out / "final").mkdir(parents=True)
    (out / "plan.yaml").write_bytes(plan.read_bytes())
    (out / "run_report.json").write_text('{"status": "completed"}')
    data = _data(tmp_path)
    before = snapshot(tmp_path)
    code, err = _launch(capsys, plan, data, out, "--cpu", "--resume")
    assert code == 2 and "already completed" in _one_error(err)
    assert snapshot(tmp_path) == before and no_run == []


def test_an_output_dir_under_a_file_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, no_run: list[LaunchSpec]
) -> None:
    plan = save_plan(make_plan(), tmp_path / "plan.yaml")
    (tmp_path / "afile").write_text("x")
    code, err = _launch(capsys, plan, _data(tmp_path), tmp_path / "afile" / "run", "--cpu", "--dry-run")
    assert code == 2 and "is a file, not a directory" in _one_error(err)


def _edited(tmp_path: Path, old: str, new: str) -> Path:
    path = save_plan(make_plan(), tmp_path / "plan.yaml")
    text = path.read_text()
    assert old in text
    edited = tmp_path / "edited.yaml"
    edited.write_text(text.replace(old, new, 1))
    return edited


@pytest.mark.parametrize("mode", ["dry-run", "launch"])
@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("gpu: rtx-4090", "gpu: rtx-9999", "unknown GPU 'rtx-9999'"),
        ("micro_batch_size: 2\n", "micro_batch_size: 4000\n", "× --grad-accum 4 × 1 GPU(s) = 16000 ≠"),
        ("schema_version: 3", "schema_version: true", "no integer schema_version"),
        ("sharding: none", "sharding: fsdp", "--sharding fsdp needs more than one GPU"),
    ],
    ids=["unknown-gpu", "absurd-micro-batch", "bool-version", "fsdp-on-one-gpu"],
)
def test_a_hand_edited_plan_is_refused_with_the_words_of_plan(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    no_run: list[LaunchSpec],
    mode: str,
    old: str,
    new: str,
    expected: str,
) -> None:
    plan = _edited(tmp_path, old, new)
    out = tmp_path / "run"
    code, err = _launch(capsys, plan, _data(tmp_path), out, "--cpu", *MODES[mode])
    assert code == 2 and expected in _one_error(err)
    assert not out.exists() and no_run == []


def test_a_plan_edited_past_the_model_maximum_warns_as_plan_does(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, no_run: list[LaunchSpec]
) -> None:
    plan = _edited(tmp_path, "seq_len: 2048", "seq_len: 100000")
    code, err = _launch(capsys, plan, _data(tmp_path), tmp_path / "run", "--cpu", "--dry-run")
    assert code == 0
    assert "--seq-len 100000 exceeds llama3-8b's max_position_embeddings 8192" in err
    assert "re-estimated, the plan does not fit" in err
    plan = save_plan(make_plan(), tmp_path / "plain.yaml")
    code, err = _launch(
        capsys, plan, _data(tmp_path), tmp_path / "run", "--cpu", "--dry-run", "--set", "seq_len=100000"
    )
    assert code == 0 and "--set: --seq-len 100000 exceeds llama3-8b's max_position_embeddings 8192" in err


@pytest.mark.parametrize(
    ("setting", "expected"),
    [
        ({"sharding": "fsdp", "gpus": 2}, "--cpu cannot run sharding fsdp"),
        ({"sharding": "fsdp-offload", "gpus": 2}, "--cpu cannot run sharding fsdp-offload"),
        ({"kernels": "liger"}, "kernels=liger runs Triton GPU kernels and cannot run on the CPU"),
        ({"fp8": True}, "fp8 runs torch._scaled_mm on an FP8 GPU and cannot run on the CPU"),
    ],
    ids=["fsdp", "fsdp-offload", "liger", "fp8"],
)
@pytest.mark.parametrize("mode", ["dry-run", "launch"])
def test_cpu_with_a_plan_that_cannot_run_on_the_cpu_is_one_line_before_anything(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    no_run: list[LaunchSpec],
    setting: dict[str, Any],
    expected: str,
    mode: str,
) -> None:
    plan = save_plan(make_plan(**setting), tmp_path / "plan.yaml")
    out = tmp_path / "run"
    code, err = _launch(capsys, plan, _data(tmp_path), out, "--cpu", *MODES[mode])
    assert code == 2 and expected in _one_error(err)
    assert not out.exists() and no_run == []
    code, err = _launch(capsys, plan, _data(tmp_path), out, *MODES[mode])  # on GPUs it runs
    if setting.get("kernels") == "liger" and importlib.util.find_spec("liger_kernel") is None:
        assert code == 2 and "needs the Liger Kernel package" in _one_error(err)  # (the optional extra)
    elif setting.get("fp8") and importlib.util.find_spec("torchao") is None:
        assert code == 2 and "fp8 needs torchao" in _one_error(err)  # (the optional extra)
    else:
        assert code == 0, err


@pytest.mark.parametrize("mode", ["dry-run", "launch"])
def test_a_broken_dataset_line_is_named_before_the_run_directory_exists(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, no_run: list[LaunchSpec], mode: str
) -> None:
    plan = save_plan(make_plan(), tmp_path / "plan.yaml")
    out = tmp_path / "run"
    data = _data(tmp_path, '{"text": "a"}\n{"text": "b"\n{"text": "c"}\n')
    code, err = _launch(capsys, plan, data, out, "--cpu", *MODES[mode])
    assert code == 2 and f"dataset {data} line 2: not valid JSON" in _one_error(err)
    assert not out.exists() and no_run == []
    data.write_text('{"text": "a"}\n{"text": 7}\n')
    code, err = _launch(capsys, plan, data, out, "--cpu", *MODES[mode])
    assert code == 2 and "line 2: 'text' must be a string, got int" in _one_error(err)
    assert not out.exists() and no_run == []


class TestHubModel:
    """A hub model id is loaded from the cache or downloaded; offline and not cached fails at once."""

    @pytest.fixture
    def empty_cache(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
        cache = tmp_path / "hub-cache"
        cache.mkdir()
        monkeypatch.setenv("HF_HUB_CACHE", str(cache))
        return cache

    def test_offline_and_not_cached_is_refused_before_anything(
        self, capsys: pytest.CaptureFixture[str], tmp_path: Path, no_run: list[LaunchSpec], empty_cache: Path
    ) -> None:
        plan = save_plan(make_plan(), tmp_path / "plan.yaml")
        out = tmp_path / "run"
        for mode in ("dry-run", "launch"):
            code, err = _launch(capsys, plan, _data(tmp_path), out, "--cpu", *MODES[mode])
            line = _one_error(err)
            assert code == 2 and f"model {HUB_MODEL} is not in the Hugging Face cache" in line
            assert "HF_HUB_OFFLINE is set" in line
            assert f"(hf download {HUB_MODEL})" in line  # the CLI the locked huggingface_hub ships
        assert not out.exists() and no_run == []
        add_cached_model(empty_cache, HUB_MODEL)
        code, err = _launch(capsys, plan, _data(tmp_path), out, "--cpu", "--dry-run")
        assert code == 0, err

    def test_a_cached_snapshot_needs_weights_and_a_tokenizer(self, empty_cache: Path) -> None:
        snapshot_dir = add_cached_model(empty_cache, HUB_MODEL)
        assert preflight.cached_snapshot(HUB_MODEL) == snapshot_dir
        (snapshot_dir / "tokenizer.json").unlink()
        assert preflight.cached_snapshot(HUB_MODEL) is None

    def test_an_unreachable_hub_is_refused_without_waiting(
        self, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, empty_cache: Path
    ) -> None:
        import socket

        with socket.socket() as closed:  # a port of this machine that nothing listens on: refused at once
            closed.bind(("127.0.0.1", 0))
            port = closed.getsockname()[1]
        monkeypatch.delenv("HF_HUB_OFFLINE")
        for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY"):
            monkeypatch.delenv(name, raising=False)
            monkeypatch.delenv(name.lower(), raising=False)
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
        plan = save_plan(make_plan(), tmp_path / "plan.yaml")
        code, err = _launch(capsys, plan, _data(tmp_path), tmp_path / "run", "--cpu", "--dry-run")
        assert code == 2 and "127.0.0.1 cannot be reached" in _one_error(err)
        monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")  # behind a proxy: not probed
        assert preflight.hub_reachable() is None

    def test_cache_location_follows_huggingface_hub(self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
        monkeypatch.delenv("HF_HUB_CACHE")
        monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
        assert preflight.hub_cache_dir() == tmp_path / "hf" / "hub"
        monkeypatch.delenv("HF_HOME")
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
        assert preflight.hub_cache_dir() == tmp_path / "xdg" / "huggingface" / "hub"
        monkeypatch.setenv("HF_HUB_OFFLINE", "0")
        monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
        assert not preflight.hub_offline()
        monkeypatch.setenv("HF_HUB_OFFLINE", "yes")
        assert preflight.hub_offline()


def test_a_local_model_path_that_does_not_exist_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, no_run: list[LaunchSpec]
) -> None:
    plan = make_plan()
    plan = plan.model_copy(update={"model_source": str(tmp_path / "models" / "gone")})
    path = save_plan(plan, tmp_path / "plan.yaml")
    code, err = _launch(capsys, path, _data(tmp_path), tmp_path / "run", "--cpu", "--dry-run")
    assert code == 2 and "not found" in _one_error(err)
    assert sorted(os.listdir(tmp_path)) == ["d.jsonl", "plan.yaml"]


@pytest.mark.skipif(importlib.util.find_spec("torchao") is not None, reason="torchao is installed: nothing to refuse")
@pytest.mark.parametrize("mode", ["dry-run", "launch"])
def test_stochastic_rounding_without_torchao_is_one_line_before_anything(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, no_run: list[LaunchSpec], mode: str
) -> None:
    """A plan with bf16_stochastic_rounding needs torchao where it runs: refused in one line, nothing written."""
    plan = save_plan(make_plan(method="full", bf16_stochastic_rounding=True), tmp_path / "plan.yaml")
    out = tmp_path / "run"
    code, err = _launch(capsys, plan, _data(tmp_path), out, "--cpu", *MODES[mode])
    assert code == 2 and "bf16_stochastic_rounding needs torchao" in _one_error(err)
    assert not out.exists() and not no_run
