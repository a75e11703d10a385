"""Every file the project writes is atomic: a failure (disk full, Ctrl-C) leaves what was there, and says so."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest
from plans import make_plan

from autotune import fileio
from autotune.costmodel.calibration import save_coefficients
from autotune.errors import ConfigError, InvalidRequestError
from autotune.launcher import build_launch_spec, prepare_output_dir
from autotune.launcher.options import LaunchOptions
from autotune.schemas.calibration import CostCoefficients
from autotune.schemas.plan_io import save_plan


def _disk_full(monkeypatch: pytest.MonkeyPatch) -> None:
    def fsync(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(fileio.os, "fsync", fsync)


def _no_temporaries(directory: Path) -> None:
    assert not [p for p in directory.iterdir() if fileio.is_temporary(p.name)]


def test_write_creates_exclusively(tmp_path: Path) -> None:
    target = tmp_path / "a.txt"
    fileio.write_atomic(target, "one")
    with pytest.raises(InvalidRequestError, match="already exists"):
        fileio.write_atomic(target, "two")
    assert target.read_text() == "one"


def test_overwrite_replaces(tmp_path: Path) -> None:
    target = tmp_path / "a.txt"
    fileio.write_atomic(target, "one")
    fileio.write_atomic(target, b"two", overwrite=True)
    assert target.read_text() == "two"
    _no_temporaries(tmp_path)


def test_missing_directory_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        fileio.write_atomic(tmp_path / "no" / "a.txt", "x")


@pytest.mark.parametrize("existing", [None, "old content"])
def test_disk_full_keeps_what_was_there(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, existing: str | None) -> None:
    target = tmp_path / "a.txt"
    if existing is not None:
        target.write_text(existing)
    _disk_full(monkeypatch)
    with pytest.raises(ConfigError) as caught:
        fileio.write_atomic(target, "new", overwrite=True)
    message = str(caught.value)
    assert "No space left" in message
    assert ("unchanged" in message) if existing else ("nothing was written" in message)
    assert (target.read_text() if target.exists() else None) == existing
    _no_temporaries(tmp_path)


def test_interrupt_mid_write_keeps_what_was_there(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    target = tmp_path / "a.txt"
    target.write_text("old")

    def interrupted(fd: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(fileio.os, "fsync", interrupted)
    with pytest.raises(ConfigError, match="interrupted"):
        fileio.write_atomic(target, "new", overwrite=True)
    assert target.read_text() == "old"
    _no_temporaries(tmp_path)


def test_concurrent_creator_wins_and_is_kept(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    target = tmp_path / "a.txt"
    real_link = os.link

    def link(source: Any, destination: Any) -> None:
        Path(destination).write_text("theirs")  # another process created it meanwhile
        real_link(source, destination)

    monkeypatch.setattr(fileio.os, "link", link)
    with pytest.raises(InvalidRequestError):
        fileio.write_atomic(target, "ours")
    assert target.read_text() == "theirs"
    _no_temporaries(tmp_path)


def test_calibration_on_full_disk_leaves_no_empty_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    target = tmp_path / "calibration.yaml"
    _disk_full(monkeypatch)
    with pytest.raises(ConfigError):
        save_coefficients(CostCoefficients(), target)
    assert not target.exists()


def test_calibration_overwrite_on_full_disk_keeps_previous(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    target = tmp_path / "calibration.yaml"
    save_coefficients(CostCoefficients(), target)
    before = target.read_text()
    _disk_full(monkeypatch)
    with pytest.raises(ConfigError, match="unchanged"):
        save_coefficients(CostCoefficients(), target, overwrite=True)
    assert target.read_text() == before


def test_plan_on_full_disk_leaves_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _disk_full(monkeypatch)
    with pytest.raises(ConfigError):
        save_plan(make_plan(), tmp_path / "plan.yaml")
    assert not (tmp_path / "plan.yaml").exists()


def test_existing_plan_never_overwritten(tmp_path: Path) -> None:
    target = tmp_path / "plan.yaml"
    target.write_text("mine")
    with pytest.raises(InvalidRequestError):
        save_plan(make_plan(), target)
    assert target.read_text() == "mine"


def test_run_report_write_is_atomic(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from run_reports import make_report

    from autotune.trainer.report import write_report

    target = tmp_path / "run_report.json"
    target.write_text('{"status": "completed"}')
    _disk_full(monkeypatch)
    with pytest.raises(ConfigError, match="unchanged"):
        write_report(make_report(make_plan()), target)
    assert target.read_text() == '{"status": "completed"}'


def test_launch_files_on_full_disk_keep_no_partial_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    options = LaunchOptions(dataset="d", output_dir=str(tmp_path / "run"))
    spec = build_launch_spec(make_plan(sharding="zero3", gpus=2), options)
    _disk_full(monkeypatch)
    with pytest.raises(ConfigError):
        prepare_output_dir(spec, tmp_path / "run", resume=False)
    assert not [p for p in (tmp_path / "run").iterdir() if p.stat().st_size == 0]


@pytest.mark.parametrize(
    "error,full",
    [
        (OSError(errno.ENOSPC, "No space left on device"), True),
        (RuntimeError("[enforce fail at inline_container.cc:664] . PytorchStreamWriter failed writing file"), False),
        (
            RuntimeError("[enforce fail at inline_container.cc:664] . unexpected pos 2240 vs 2108: file write failed"),
            True,
        ),
        (OSError(errno.EDQUOT, "Disk quota exceeded"), True),
        (FileNotFoundError(2, "No such file or directory"), False),
        (ValueError("nan loss"), False),
    ],
)
def test_trainer_recognises_a_full_disk(error: BaseException, full: bool) -> None:
    from autotune.trainer.checkpoints import out_of_space

    wrapped = RuntimeError("while saving")
    wrapped.__cause__ = error
    assert out_of_space(error) is full and out_of_space(wrapped) is full


def test_file_system_without_hard_links_still_exclusive(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def no_links(source: Any, destination: Any) -> None:
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(fileio.os, "link", no_links)
    target = tmp_path / "a.txt"
    fileio.write_atomic(target, "one")
    assert target.read_text() == "one"
    with pytest.raises(InvalidRequestError):
        fileio.write_atomic(target, "two")
    assert target.read_text() == "one"
    _no_temporaries(tmp_path)
