"""Checkpoints that are complete or ignored: a manifest marks each finished save; resume takes the newest intact one.

transformers' Trainer writes a checkpoint file by file; a ``kill -9`` (or a full disk) in the middle
would leave a directory that looks like a checkpoint and is not. So the Trainer writes it under a
temporary name, ``OUT/checkpoints/.staging/checkpoint-<step>/``
(:class:`autotune.trainer.staged_save.StagedSaveMixin`); once every rank has finished,
:func:`publish_checkpoint` fsyncs its files, writes ``autotune_checkpoint.json`` (atomically, listing
each file with its size) and renames the directory to ``OUT/checkpoints/checkpoint-<step>/``. A
leftover under ``.staging``, or a ``checkpoint-<step>`` without a manifest, is *partial*.

On ``--resume``, :func:`find_resume_checkpoint` walks the checkpoints from the newest and takes the
first that verifies: the manifest lists every file at its recorded size (and the weights and configs with their
SHA-256), ``trainer_state.json``
parses and records the same step, each ``*.safetensors`` has a complete header and data section
(safetensors format: 8-byte little-endian header length, JSON header, then the tensors up to the
largest ``data_offsets`` end), and each torch pickle (``*.pt``/``*.pth``/``*.bin``) is a complete
zip archive (torch.save's format since torch 1.6; a truncated file loses its central directory).
Checkpoints skipped on the way are reported and moved to ``OUT/checkpoints/ignored/`` (kept, never
deleted), so the Trainer's own rotation (``save_total_limit``, which globs ``checkpoint-*``) never
counts them or deletes an intact one because of them.

The manifest also records the plan that trained the checkpoint; ``autotune.schemas.plan_changes`` compares it with
the plan being resumed, so an edited LoRA rank or sequence length is refused before training.
Standard library only (no torch): the checks are cheap and testable alone.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import re
import struct
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autotune.errors import ConfigError
from autotune.fileio import fsync_directory, give_umask_mode, is_temporary, write_atomic
from autotune.schemas.plan import PlanFile
from autotune.schemas.plan_changes import plan_fingerprint

logger = logging.getLogger("autotune.trainer")

MANIFEST = "autotune_checkpoint.json"
IGNORED_DIR = "ignored"
STAGING_DIR = ".staging"
"""Where a checkpoint is written before it is complete: ``OUT/checkpoints/.staging/checkpoint-<step>``."""
_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")
TRAINER_STATE_PREFIXES = ("optimizer", "scheduler", "rng_state", "trainer_state")
"""Files of a checkpoint that only a resume reads (the Trainer's optimizer, scheduler, RNG and loop state): not part of
an exported model, and not hashed in the manifest (the optimizer state of a full fine-tuning run is twice the
weights; a resume checks them by size and format)."""
HASH_CHUNK_BYTES = 1 << 20
"""Files are hashed in 1 MiB reads (constant memory)."""
_PICKLE_SUFFIXES = (".pt", ".pth", ".bin")


@dataclass(frozen=True)
class ResumePoint:
    """Where ``--resume`` continues from, and what was skipped to get there."""

    checkpoint: Path | None
    step: int
    skipped: tuple[str, ...]
    """One line per skipped checkpoint: ``checkpoint-N (reason) → moved to ...``."""


def checkpoint_step(path: Path | None) -> int:
    """The step of a ``checkpoint-<step>`` directory (0 for None or another name)."""
    match = _CHECKPOINT.match(path.name) if path is not None else None
    return int(match.group(1)) if match else 0


def list_checkpoints(checkpoints_dir: Path) -> list[Path]:
    """``checkpoint-<step>`` directories, newest (highest step) first."""
    if not checkpoints_dir.is_dir():
        return []
    found = [p for p in checkpoints_dir.iterdir() if _CHECKPOINT.match(p.name) and p.is_dir()]
    return sorted(found, key=checkpoint_step, reverse=True)


def verify_checkpoint(path: Path) -> str | None:
    """Why ``path`` is not an intact checkpoint, or None if it is (see the module docstring)."""
    manifest_path = path / MANIFEST
    if not manifest_path.is_file():
        return "partial: no manifest (the save did not finish)"
    manifest = _load_manifest(manifest_path)
    try:
        step = int(manifest["step"]) if manifest is not None else -1
    except (ValueError, KeyError, TypeError):
        manifest = None
    if manifest is None:
        return f"unreadable {MANIFEST}"
    if step != checkpoint_step(path):
        return f"{MANIFEST} records step {step}"
    problem = verify_files(path, manifest)
    if problem:
        return problem
    state = path / "trainer_state.json"
    try:
        if int(json.loads(state.read_text(encoding="utf-8"))["global_step"]) != step:
            return "trainer_state.json records another step"
    except (OSError, ValueError, KeyError, TypeError):
        return "trainer_state.json is missing or unreadable"
    return None


def verify_weights(folder: Path) -> str | None:
    """Why a folder of weights ``autotune export`` reads (``final/`` or a checkpoint) is not what the trainer wrote.

    A checkpoint: :func:`verify_checkpoint`. ``final/``: :func:`verify_files` against its manifest; a ``final/`` of a
    run from before it had one: the format check of every file (a truncated safetensors file is still refused).
    """
    if _CHECKPOINT.match(folder.name):
        return verify_checkpoint(folder)
    manifest_path = folder / MANIFEST
    if manifest_path.is_file():
        manifest = _load_manifest(manifest_path)
        return verify_files(folder, manifest) if manifest is not None else f"unreadable {MANIFEST}"
    for file in sorted(folder.rglob("*")):
        problem = _check_format(file) if file.is_file() else None
        if problem:
            return f"{file.relative_to(folder)}: {problem}"
    return None


def _load_manifest(path: Path) -> dict[str, Any] | None:
    """The manifest at ``path`` when it parses with a ``files`` mapping (and a ``sha256`` mapping if any), or None."""
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
        return None
    return manifest if isinstance(manifest.get("sha256") or {}, dict) else None


def verify_files(folder: Path, manifest: dict[str, Any]) -> str | None:
    """Why the files of ``folder`` are not those its manifest lists, or None.

    Each file is at its recorded size, complete in its format (:func:`_check_format`), and of its recorded SHA-256
    where the manifest has one (manifests written before the hashes have sizes only).
    """
    files: dict[str, int] = manifest["files"]
    hashes: dict[str, str] = manifest.get("sha256") or {}
    for name, size in files.items():
        file = folder / name
        try:
            actual = file.stat().st_size
        except OSError:
            return f"{name} is missing"
        if actual != size:
            return f"{name} has {actual} bytes, {size} were written"
        problem = _check_format(file)
        if problem:
            return f"{name}: {problem}"
        if name in hashes and file_sha256(file) != hashes[name]:
            return f"{name} is not the file that was written (another SHA-256)"
    return None


def file_sha256(file: Path) -> str:
    """The SHA-256 of a file, read in :data:`HASH_CHUNK_BYTES` chunks (hex)."""
    digest = hashlib.sha256()
    with file.open("rb") as handle:
        while chunk := handle.read(HASH_CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


def read_manifest(path: Path) -> dict[str, Any]:
    """The manifest of an intact checkpoint (call :func:`verify_checkpoint` first)."""
    data: dict[str, Any] = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
    return data


def recorded_cpu_threads(checkpoint: Path) -> int | None:
    """The intra-op thread count ``checkpoint``'s run computed with (its manifest), or None when not recorded.

    A CPU matmul's reduction order depends on its thread count, so a run resumed with another count drifts from the
    uninterrupted run by rounding (~1e-7 relative on the tiny test model; docs/launcher.md, ``--cpu`` threads): the
    core sets the recorded count again on ``--resume``.
    """
    try:
        value = read_manifest(checkpoint).get("cpu_threads")
    except (OSError, ValueError):
        return None
    return value if isinstance(value, int) and value > 0 else None


def find_resume_checkpoint(checkpoints_dir: Path) -> ResumePoint:
    """The newest intact checkpoint; broken newer ones are moved to ``ignored/`` and listed.

    Raises:
        ConfigError: no checkpoint at all, or none intact (each one's reason is named).
    """
    skipped = [
        f"{leftover.name} (partial: its save did not finish) moved to {_set_aside(leftover)}"
        for leftover in list_checkpoints(checkpoints_dir / STAGING_DIR)
    ]
    for checkpoint in list_checkpoints(checkpoints_dir):
        reason = verify_checkpoint(checkpoint)
        if reason is None:
            return ResumePoint(checkpoint=checkpoint, step=checkpoint_step(checkpoint), skipped=tuple(skipped))
        skipped.append(f"{checkpoint.name} ({reason}) moved to {_set_aside(checkpoint)}")
    if skipped:
        raise ConfigError(
            f"--resume: no intact checkpoint under {checkpoints_dir} ({'; '.join(skipped)}); start a new run"
        )
    raise ConfigError(f"--resume: no checkpoint under {checkpoints_dir} to continue from")


def resolve_start(output_dir: Path, checkpoints_dir: Path, report_path: Path, *, resume: bool) -> ResumePoint:
    """Where this invocation starts: from scratch, or (``resume``) from the newest intact checkpoint.

    Without ``resume`` a directory holding a run (``run_report.json`` or a checkpoint) is refused;
    the plan and launcher configs written by ``autotune launch`` are expected and kept. With
    ``resume`` a run whose report says ``completed`` is refused (resuming would re-enter training
    and rewrite its report).

    Raises:
        ConfigError: one line naming what is there and the fix.
    """
    if not resume:
        existing = (["run_report.json"] if report_path.exists() else []) + [
            f"checkpoints/{p.name}" for p in list_checkpoints(checkpoints_dir)[:1]
        ]
        if existing:
            raise ConfigError(
                f"output directory {output_dir} already holds a run ({', '.join(existing)}); "
                "pass --resume to continue it or choose another --output-dir"
            )
        return ResumePoint(checkpoint=None, step=0, skipped=())
    status, steps = _report_status(report_path)
    if status == "completed":
        raise ConfigError(
            f"--resume: the run in {output_dir} already completed ({steps} steps, {report_path.name}); "
            "nothing to resume: start a new run with another --output-dir"
        )
    return find_resume_checkpoint(checkpoints_dir)


def _report_status(report_path: Path) -> tuple[str | None, object]:
    try:
        data = json.loads(report_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None, None
    if not isinstance(data, dict):
        return None, None
    return data.get("status"), data.get("steps")


def publish_checkpoint(staged: Path, target: Path, step: int, plan: PlanFile, cpu_threads: int | None = None) -> None:
    """Make a staged checkpoint visible: write its manifest, then rename it to ``target`` (atomic).

    A ``target`` that already exists (left by an older autotune, or a checkpoint of a step that is
    trained again) is moved to ``ignored/`` first. The directory holding ``target`` is fsync-ed.
    """
    give_umask_mode(staged)  # safetensors writes 0600
    write_manifest(staged, step, plan, cpu_threads)
    if target.exists():
        _set_aside(target)
    staged.rename(target)
    if staged.parent.name == STAGING_DIR:
        with contextlib.suppress(OSError):  # not empty: another save's leftover stays for --resume to set aside
            staged.parent.rmdir()  # no empty .staging/ left in the run
    fsync_directory(target.parent)


def set_aside_leftover(staged: Path) -> None:
    """Move the leftover of a save that did not finish (a killed run) out of the way, keeping it."""
    if staged.exists():
        logger.warning("partial checkpoint %s (its save did not finish) moved to %s", staged, _set_aside(staged))


def _set_aside(checkpoint: Path) -> Path:
    """Move a broken checkpoint to ``ignored/`` under a free name; return where it went."""
    checkpoints_dir = checkpoint.parent.parent if checkpoint.parent.name == STAGING_DIR else checkpoint.parent
    target_dir = checkpoints_dir / IGNORED_DIR
    target_dir.mkdir(exist_ok=True)
    for attempt in range(1000):
        target = target_dir / (checkpoint.name + (f".{attempt}" if attempt else ""))
        if not target.exists():
            checkpoint.rename(target)
            return target
    raise ConfigError(f"cannot set aside broken checkpoint {checkpoint}: {target_dir} is full")


def write_manifest(checkpoint: Path, step: int, plan: PlanFile, cpu_threads: int | None = None) -> None:
    """Mark ``checkpoint`` (a checkpoint or ``final/``) complete: fsync its files, then write the manifest atomically.

    The manifest lists every file with its size, and the SHA-256 of each file but the trainer state
    (:data:`TRAINER_STATE_PREFIXES`): what ``autotune export`` checks before it copies or merges the weights.

    ``cpu_threads``: the intra-op threads the run computed with (``torch.get_num_threads()``), recorded so that a
    resumed CPU run computes with the same (:func:`recorded_cpu_threads`).
    """
    files: dict[str, int] = {}
    hashes: dict[str, str] = {}
    for file in sorted(checkpoint.rglob("*")):
        if file.is_file() and file.name != MANIFEST and not is_temporary(file.name):
            with file.open("rb") as handle:
                os.fsync(handle.fileno())
            name = str(file.relative_to(checkpoint))
            files[name] = file.stat().st_size
            if not file.name.startswith(TRAINER_STATE_PREFIXES):
                hashes[name] = file_sha256(file)
    fsync_directory(checkpoint)
    manifest: dict[str, Any] = {"step": step, "files": files, "sha256": hashes, "plan": plan_fingerprint(plan)}
    if cpu_threads is not None:
        manifest["cpu_threads"] = cpu_threads
    text = json.dumps(manifest, indent=1) + "\n"
    write_atomic(checkpoint / MANIFEST, text, overwrite=True, what="checkpoint manifest")


def _check_format(file: Path) -> str | None:
    """A cheap completeness check of one checkpoint file by its format (None when fine)."""
    name = file.name
    try:
        if name.endswith(".safetensors"):
            return _check_safetensors(file)
        if name.endswith(_PICKLE_SUFFIXES) and zipfile.is_zipfile(file):
            with zipfile.ZipFile(file) as archive:
                archive.infolist()
            return None
        if name.endswith(_PICKLE_SUFFIXES):
            return "not a complete torch archive"
        if name.endswith(".json"):
            json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError, zipfile.BadZipFile) as error:
        return f"unreadable ({' '.join(str(error).split())[:80]})"
    return None


def _check_safetensors(file: Path) -> str | None:
    size = file.stat().st_size
    with file.open("rb") as handle:
        head = handle.read(8)
        if len(head) < 8:
            return "truncated safetensors header"
        (header_len,) = struct.unpack("<Q", head)
        if header_len > size - 8:
            return "truncated safetensors header"
        header = json.loads(handle.read(header_len))
    end = max((int(v["data_offsets"][1]) for k, v in header.items() if k != "__metadata__"), default=0)
    if 8 + header_len + end != size:
        return f"truncated safetensors data ({size} bytes, {8 + header_len + end} expected)"
    return None


NO_SPACE_MESSAGES: tuple[str, ...] = (
    "No space left on device",  # strerror(ENOSPC), also in safetensors' "I/O error: ... (os error 28)"
    "Disk quota exceeded",  # strerror(EDQUOT)
    "file write failed",  # torch.save: PytorchStreamWriter "failed writing file ...: file write failed"
    "unexpected pos",  # torch.save: caffe2 inline_container "[enforce fail ...] unexpected pos N vs M" (short write)
)
"""How a full disk shows in errors that carry no errno (torch 2.13 ``caffe2/serialize/inline_container.cc``)."""

LOW_SPACE_BYTES: int = 16 << 20
"""Free bytes under which a failed write is taken as a full disk whatever its message (16 MiB: less than one
shard of any checkpoint a GPU run writes; file systems keep a reserve, so "full" rarely reads exactly 0)."""


def free_bytes(directory: Path) -> int | None:
    """Bytes available to this user on ``directory``'s file system (``statvfs``), or None if unknown."""
    path = directory
    while not path.exists() and path != path.parent:
        path = path.parent
    try:
        stats = os.statvfs(path)
    except OSError:
        return None
    return stats.f_bavail * stats.f_frsize


def out_of_space(error: BaseException, directory: Path | None = None) -> bool:
    """True when ``error``, or one it was raised from, reports a full disk.

    That is ``ENOSPC`` / ``EDQUOT``, one of :data:`NO_SPACE_MESSAGES` (``torch.save`` raises ``RuntimeError`` without an
    errno), or any error while ``directory``'s file system has less than :data:`LOW_SPACE_BYTES` free.
    """
    seen: BaseException | None = error
    for _ in range(10):
        if seen is None:
            break
        if isinstance(seen, OSError) and seen.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if any(text in str(seen) for text in NO_SPACE_MESSAGES):
            return True
        seen = seen.__cause__ or seen.__context__
    available = free_bytes(directory) if directory is not None else None
    return available is not None and available < LOW_SPACE_BYTES
