"""Whether a run directory ever trained, and making one that did not reusable by the same command.

A launch that stops before its first checkpoint (a dataset or tokenizer problem found by the training core, a
crash while loading, Ctrl-C during start-up) leaves ``OUT/`` with the plan and launcher configs, and perhaps a
``run_report.json`` saying ``failed``, but nothing to resume from. Such a directory is *not started*: relaunching
into it with the same command (or with ``--resume``) starts at step 0 instead of being refused, and nothing in
it is deleted — a previous report is kept under a new name (:func:`set_aside_report`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Final

from autotune import run_lock
from autotune.errors import AutotuneError, InvalidRequestError
from autotune.launcher.options import PLAN_FILE
from autotune.yamlio import parse_json, read_text_file

REPORT_FILE: Final[str] = "run_report.json"
"""The training core's report (``autotune.trainer``; written when a run ends)."""

CHECKPOINTS_DIR: Final[str] = "checkpoints"
FINAL_DIR: Final[str] = "final"
CHECKPOINT_PREFIX: Final[str] = "checkpoint-"
"""transformers' Trainer names each checkpoint ``checkpoint-<step>`` (``trainer_utils.PREFIX_CHECKPOINT_DIR``)."""
MANIFEST_FILE: Final[str] = "autotune_checkpoint.json"
"""A finished checkpoint's manifest, written by the training core (``autotune.trainer.checkpoints.MANIFEST``; named
here, not imported: the launcher never imports the training core). Its ``plan`` is the plan's fingerprint."""


def _report_status(out: Path) -> str | None:
    try:
        data = json.loads((out / REPORT_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data.get("status") if isinstance(data, dict) else None


def never_trained(out: Path) -> bool:
    """True when ``out`` is a run directory (``autotune launch`` wrote its ``plan.yaml``) that holds no training state.

    No training state: no checkpoint (a partial save does not count), no ``final/``, and no report of a completed run.
    Such a directory is safe to start again from step 0; any other existing directory is not touched.
    """
    if not (out / PLAN_FILE).is_file():
        return False
    if (out / FINAL_DIR).exists() or _report_status(out) == "completed":
        return False
    checkpoints = out / CHECKPOINTS_DIR
    if not checkpoints.is_dir():
        return True
    return not any(path.name.startswith(CHECKPOINT_PREFIX) for path in checkpoints.iterdir())


def newest_checkpoint_plan(checkpoints: Path) -> tuple[dict[str, Any], str] | None:
    """The plan fingerprint recorded by the newest checkpoint whose manifest records one, and that checkpoint's name.

    Checkpoints are ordered by step (``checkpoint-<step>``); a manifest that is missing or unreadable is passed over
    (``--resume`` sets such a checkpoint aside). None when no checkpoint records a plan.
    """
    if not checkpoints.is_dir():
        return None
    steps = []
    for path in checkpoints.iterdir():
        step = path.name.removeprefix(CHECKPOINT_PREFIX)
        if path.name.startswith(CHECKPOINT_PREFIX) and step.isdigit():
            steps.append((int(step), path))
    for _, path in sorted(steps, reverse=True):
        manifest_path = path / MANIFEST_FILE
        try:
            manifest = parse_json(read_text_file(manifest_path, "checkpoint manifest"), str(manifest_path), "manifest")
        except AutotuneError:
            continue
        recorded = manifest.get("plan") if isinstance(manifest, dict) else None
        if isinstance(recorded, dict):
            return recorded, path.name
    return None


def set_aside_report(out: Path) -> Path | None:
    """Rename a previous ``run_report.json`` of a run that never trained to ``run_report.N.json`` (the first free N).

    So the new run writes its own; returns the new name (None when there was no report).
    """
    report = out / REPORT_FILE
    if not report.exists():
        return None
    index = 1
    while (target := out / f"run_report.{index}.json").exists():
        index += 1
    report.rename(target)
    return target


def check_run_directory(out: Path, *, resume: bool) -> bool:
    """Decide from ``out``'s state, changing nothing, whether a launch (or ``--resume``) may use it.

    - missing: a new run may create it (its nearest existing parent must be a writable directory);
      ``--resume`` is refused (nothing to resume);
    - a regular file (or anything but a directory): refused;
    - a directory whose run lock is held by a live run (:func:`autotune.run_lock.probe`): refused;
    - a run directory (``plan.yaml`` written by ``autotune launch``) that never trained (:func:`never_trained`):
      allowed, with or without ``--resume`` (the run starts at step 0); returns True;
    - a run directory that trained: ``--resume`` continues it, unless its report says ``completed``;
      without ``--resume`` refused;
    - any other directory (empty, or the user's files): refused, also with ``--resume``, so that a refused
      resume never writes a ``plan.yaml`` into a directory that was not a run.

    Returns:
        True when ``out`` is a run directory that never trained (start it again from step 0).

    Raises:
        InvalidRequestError: one line naming the directory, its state and the fix (nothing was written).
    """
    if not out.exists():
        if resume:
            raise InvalidRequestError(
                f"--resume: output directory {out} does not exist (nothing to resume; drop --resume to start)"
            )
        _check_creatable(out)
        return False
    if not out.is_dir():
        raise InvalidRequestError(
            f"--output-dir {out} is a file, not a directory: choose a new --output-dir (nothing was written)"
        )
    run_lock.probe(out)
    if (out / PLAN_FILE).is_file():
        if never_trained(out):
            return True
        if not resume:
            raise InvalidRequestError(
                f"output directory {out} already exists and holds a run; add --resume to continue it, "
                "or choose a new --output-dir"
            )
        if _report_status(out) == "completed":
            raise InvalidRequestError(
                f"--resume: the run in {out} already completed (see {out / FINAL_DIR}); to train more, start a "
                "new run with a new --output-dir"
            )
        return False
    try:
        empty = next(out.iterdir(), None) is None
    except OSError as error:
        raise InvalidRequestError(f"output directory {out} cannot be read: {error.strerror or error}") from None
    what = "is empty" if empty else "holds files that are not an autotune run (no plan.yaml)"
    if resume:
        raise InvalidRequestError(
            f"--resume: output directory {out} {what}: nothing to resume; choose a new --output-dir "
            "(nothing was written)"
        )
    raise InvalidRequestError(
        f"output directory {out} already exists and {what}; choose a new --output-dir (nothing was written)"
    )


def _check_creatable(out: Path) -> None:
    """The nearest existing ancestor of ``out`` is a directory this process may create entries in."""
    parent = out.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise InvalidRequestError(f"cannot create --output-dir {out}: {parent} is a file, not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InvalidRequestError(f"cannot create --output-dir {out}: {parent} is not writable")
