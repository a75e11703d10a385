"""Whether a run directory ever trained, and making one that did not reusable by the same command.

A launch that stops before its first checkpoint (a dataset or tokenizer problem found by the training core, a
crash while loading, Ctrl-C during start-up) leaves ``OUT/`` with the plan and launcher configs, and perhaps a
``run_report.json`` saying ``failed``, but nothing to resume from. Such a directory is *not started*: relaunching
into it with the same command (or with ``--resume``) starts at step 0 instead of being refused, and nothing in
it is deleted — a previous report is kept under a new name (:func:`set_aside_report`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Final

from autotune.launcher.options import PLAN_FILE

REPORT_FILE: Final[str] = "run_report.json"
"""The training core's report (``autotune.trainer``; written when a run ends)."""

CHECKPOINTS_DIR: Final[str] = "checkpoints"
FINAL_DIR: Final[str] = "final"
CHECKPOINT_PREFIX: Final[str] = "checkpoint-"
"""transformers' Trainer names each checkpoint ``checkpoint-<step>`` (``trainer_utils.PREFIX_CHECKPOINT_DIR``)."""


def _report_status(out: Path) -> str | None:
    try:
        data = json.loads((out / REPORT_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data.get("status") if isinstance(data, dict) else None


def never_trained(out: Path) -> bool:
    """True when ``out`` is a run directory (``autotune launch`` wrote its ``plan.yaml``) that holds no training
    state: no checkpoint (a partial save does not count), no ``final/``, and no report of a completed run.
    Such a directory is safe to start again from step 0; any other existing directory is not touched."""
    if not (out / PLAN_FILE).is_file():
        return False
    if (out / FINAL_DIR).exists() or _report_status(out) == "completed":
        return False
    checkpoints = out / CHECKPOINTS_DIR
    if not checkpoints.is_dir():
        return True
    return not any(path.name.startswith(CHECKPOINT_PREFIX) for path in checkpoints.iterdir())


def set_aside_report(out: Path) -> Path | None:
    """Rename a previous ``run_report.json`` of a run that never trained to ``run_report.N.json`` (the first
    free N), so the new run writes its own; returns the new name (None when there was no report)."""
    report = out / REPORT_FILE
    if not report.exists():
        return None
    index = 1
    while (target := out / f"run_report.{index}.json").exists():
        index += 1
    report.rename(target)
    return target
