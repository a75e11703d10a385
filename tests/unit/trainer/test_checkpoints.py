"""Checkpoint manifests and their pure helpers (``trainer/checkpoints.py``), in-process on tmp files.

Complements tests/robustness/test_checkpoints.py (broken checkpoints skipped on resume, publishing, refusals) and
test_export_trust.py: here what the manifest records — every file's size, the SHA-256 of all but the trainer state,
the plan, the CPU threads — that a changed byte of equal size is caught by its hash, how checkpoints are numbered and
ordered, and where free space is asked for a directory not yet made.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import zipfile
from pathlib import Path

import pytest
from plans import make_plan

from autotune.schemas.plan_changes import plan_fingerprint
from autotune.trainer import checkpoints
from autotune.trainer.checkpoints import (
    MANIFEST,
    checkpoint_step,
    file_sha256,
    free_bytes,
    list_checkpoints,
    out_of_space,
    recorded_cpu_threads,
    verify_files,
    verify_weights,
    write_manifest,
)

PLAN = make_plan()


def _folder(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "config.json").write_text('{"a": 1}')
    (root / "sub").mkdir()
    (root / "sub" / "tokenizer.json").write_text('{"b": 2}')
    with zipfile.ZipFile(root / "optimizer.pt", "w") as archive:  # the trainer state (torch.save's zip): sizes only
        archive.writestr("archive/data.pkl", b"state")
    (root / ".autotune-tmp-x1.tmp").write_text("a write in flight")  # write_atomic's temporary file: not listed
    return root


def test_the_manifest_lists_sizes_hashes_the_weights_not_the_trainer_state_and_records_the_plan(
    tmp_path: Path,
) -> None:
    folder = _folder(tmp_path / "checkpoint-5")
    write_manifest(folder, 5, PLAN, cpu_threads=3)
    manifest = json.loads((folder / MANIFEST).read_text())
    optimizer_bytes = (folder / "optimizer.pt").stat().st_size
    assert manifest["files"] == {"config.json": 8, "optimizer.pt": optimizer_bytes, "sub/tokenizer.json": 8}
    assert manifest["sha256"] == {
        "config.json": hashlib.sha256(b'{"a": 1}').hexdigest(),
        "sub/tokenizer.json": hashlib.sha256(b'{"b": 2}').hexdigest(),
    }
    assert manifest["step"] == 5 and manifest["plan"] == plan_fingerprint(PLAN)
    assert recorded_cpu_threads(folder) == 3


def test_a_changed_byte_of_the_same_size_is_caught_by_its_hash_and_a_missing_file_is_named(tmp_path: Path) -> None:
    folder = _folder(tmp_path / "final")
    write_manifest(folder, 5, PLAN)
    manifest = json.loads((folder / MANIFEST).read_text())
    assert verify_files(folder, manifest) is None
    (folder / "config.json").write_text('{"a": 2}')
    assert verify_files(folder, manifest) == "config.json is not the file that was written (another SHA-256)"
    (folder / "config.json").write_text('{"a": 1}')
    with zipfile.ZipFile(folder / "optimizer.pt", "w") as archive:  # other contents, same size: not hashed
        archive.writestr("archive/data.pkl", b"STATE")
    assert verify_files(folder, manifest) is None
    (folder / "sub" / "tokenizer.json").unlink()
    assert verify_files(folder, manifest) == "sub/tokenizer.json is missing"


def test_a_final_folder_without_a_manifest_is_checked_by_format(tmp_path: Path) -> None:
    folder = tmp_path / "final"
    folder.mkdir()
    (folder / "config.json").write_text('{"a": 1}')
    assert verify_weights(folder) is None
    (folder / "adapter.bin").write_bytes(b"\x80\x02 a pickle, not a zip archive")
    assert verify_weights(folder) == "adapter.bin: not a complete torch archive"


def test_the_sha256_is_read_in_chunks_and_equals_hashlibs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checkpoints, "HASH_CHUNK_BYTES", 7)
    file = tmp_path / "w.bin"
    data = os.urandom(100)
    file.write_bytes(data)
    assert file_sha256(file) == hashlib.sha256(data).hexdigest()


def test_checkpoints_are_numbered_by_their_step_and_listed_newest_first(tmp_path: Path) -> None:
    for name in ("checkpoint-2", "checkpoint-10", "checkpoint-9", "checkpoint-x", "ignored"):
        (tmp_path / name).mkdir()
    (tmp_path / "checkpoint-11").write_text("a file, not a checkpoint")
    assert [p.name for p in list_checkpoints(tmp_path)] == ["checkpoint-10", "checkpoint-9", "checkpoint-2"]
    assert [checkpoint_step(p) for p in (tmp_path / "checkpoint-10", tmp_path / "final", None)] == [10, 0, 0]
    assert list_checkpoints(tmp_path / "missing") == []


def test_no_recorded_threads_without_a_readable_positive_count(tmp_path: Path) -> None:
    assert recorded_cpu_threads(tmp_path) is None  # no manifest
    for value in (0, "4", None):
        (tmp_path / MANIFEST).write_text(json.dumps({"cpu_threads": value}))
        assert recorded_cpu_threads(tmp_path) is None


def test_free_space_of_a_directory_not_yet_made_is_its_nearest_existing_parents(tmp_path: Path) -> None:
    stats = os.statvfs(tmp_path)
    free = free_bytes(tmp_path / "a" / "b")
    assert free is not None and abs(free - stats.f_bavail * stats.f_frsize) < 64 << 20  # others write meanwhile


def test_a_full_disk_is_found_down_the_chain_of_causes(tmp_path: Path) -> None:
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError as inner:
            raise RuntimeError("the save failed") from inner
    except RuntimeError as outer:
        assert out_of_space(outer)
    assert not out_of_space(RuntimeError("a shape mismatch"), tmp_path)  # tmp_path has room
