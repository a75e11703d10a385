"""A DeepSpeed launch warns about torch C++-extension build locks a killed build left behind (torch's FileBaton
waits on them forever, with no output)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from plans import make_plan

from autotune.cli import app as cli_app
from autotune.launcher.preflight import describe_build_lock, extension_build_locks, torch_extensions_root
from autotune.schemas.plan_io import save_plan


def _lock(directory: Path, age_s: float = 0.0) -> Path:
    directory.mkdir(parents=True)
    lock = directory / "lock"
    lock.write_text("")
    then = time.time() - age_s
    os.utime(lock, (then, then))
    return lock


def test_the_root_follows_torch(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("TORCH_EXTENSIONS_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert torch_extensions_root() == tmp_path / "xdg" / "torch_extensions"
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))
    assert torch_extensions_root() == tmp_path / "ext"


def test_locks_are_found_at_both_layouts(tmp_path: Path) -> None:
    assert extension_build_locks(tmp_path / "missing") == []
    default_layout = _lock(tmp_path / "default" / "py311_cu124" / "cpu_adam")
    (tmp_path / "default" / "py311_cu124" / "fused_adam").mkdir()  # built, no lock: nothing to say
    assert extension_build_locks(tmp_path / "default") == [default_layout]
    explicit = _lock(tmp_path / "explicit" / "deepspeed_shm_comm")
    assert extension_build_locks(tmp_path / "explicit") == [explicit]


def test_the_warning_names_the_op_the_file_and_its_age(tmp_path: Path) -> None:
    lock = _lock(tmp_path / "py311_cu124" / "cpu_adam", age_s=3 * 3600)
    line = describe_build_lock(lock)
    assert str(lock) in line and "cpu_adam" in line and "3.0 h old" in line and "delete it" in line


@pytest.mark.parametrize(("sharding", "warned"), [("zero3-offload", True), ("fsdp", False)])
def test_a_launch_warns_only_for_deepspeed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str], sharding: str, warned: bool
) -> None:
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))
    lock = _lock(tmp_path / "ext" / "cpu_adam", age_s=600)
    plan = save_plan(make_plan(sharding=sharding, gpus=2), tmp_path / "plan.yaml")
    argv = ["launch", str(plan), "--dataset", "org/data", "--output-dir", str(tmp_path / "run"), "--dry-run"]
    cli_app.main(argv)  # returns on success (exits on an error)
    err = capsys.readouterr().err
    assert (str(lock) in err and "10 min old" in err) is warned
    assert lock.exists()  # a warning, never a deletion
