"""What the core says when Ctrl-C stops it before training, and the modes of the weight files it leaves (issue 29,
items 6 and 7)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from autotune.trainer.__main__ import interrupted_message, respect_umask


def test_an_interrupted_first_launch_does_not_claim_the_directory_held_anything(tmp_path: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    (out / "plan.yaml").write_text("plan")  # what autotune launch wrote before starting the core
    message = interrupted_message(out)
    assert "held before" not in message and "keeps" not in message
    assert "holds no checkpoint" in message and "run the same command again" in message


def test_an_interrupted_resume_keeps_its_checkpoints(tmp_path: Path) -> None:
    (tmp_path / "checkpoints" / "checkpoint-4").mkdir(parents=True)
    message = interrupted_message(tmp_path)
    assert "every finished checkpoint" in message and "--resume" in message


def test_an_interrupted_run_that_removed_its_directory_says_nothing_was_written(tmp_path: Path) -> None:
    assert "nothing was written" in interrupted_message(tmp_path / "gone")
    assert "nothing was written" in interrupted_message(None)


def test_weights_written_0600_by_safetensors_get_the_umask_mode(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    save_file = pytest.importorskip("safetensors.torch").save_file
    adapter = tmp_path / "final" / "adapter_model.safetensors"
    adapter.parent.mkdir()
    save_file({"w": torch.zeros(2)}, str(adapter))
    checkpoint = tmp_path / "checkpoints" / "checkpoint-2" / "adapter_model.safetensors"
    checkpoint.parent.mkdir(parents=True)
    save_file({"w": torch.zeros(2)}, str(checkpoint))
    private = tmp_path / "final" / "mine.txt"
    private.write_text("x")
    private.chmod(0o640)
    assert adapter.stat().st_mode & 0o777 == 0o600  # what safetensors does (the defect this fixes)
    mask = os.umask(0o022)
    try:
        respect_umask(tmp_path)
    finally:
        os.umask(mask)
    assert adapter.stat().st_mode & 0o777 == 0o644
    assert checkpoint.stat().st_mode & 0o777 == 0o644
    assert private.stat().st_mode & 0o777 == 0o640  # a mode that is not safetensors' is left alone
