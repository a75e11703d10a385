"""A run started again in its run directory on a node: start over or resume (``python -m autotune.launcher.relaunch``).

The run script of a SkyPilot task (:mod:`autotune.launcher.skypilot`) asks this before it starts the trainer, so a
relaunch of the task on the same cluster applies the same rule as ``autotune launch`` does to a local directory
(:func:`autotune.launcher.rundir.check_run_directory`): a run directory that never trained
(:func:`~autotune.launcher.rundir.never_trained`) starts again from step 0, its previous ``run_report.json`` kept
under a new name (:func:`~autotune.launcher.rundir.set_aside_report`); any other continues with ``--resume``, where the
training core resumes from the newest intact checkpoint or refuses a completed run in one line.

Prints the trainer argument to add (``--resume``, or nothing) on stdout.
"""

from __future__ import annotations

import sys
from pathlib import Path

from autotune.launcher.rundir import never_trained, set_aside_report

RESUME_FLAG = "--resume"


def relaunch_argument(out: Path) -> str:
    """``""`` for a run directory that never trained (its old report set aside), else ``--resume``.

    A directory without ``plan.yaml`` is not a run directory (``never_trained`` is False): ``--resume`` lets the
    training core refuse it in one line, as it refuses any directory with nothing to resume.
    """
    if out.exists() and not never_trained(out):
        return RESUME_FLAG
    if out.exists():
        set_aside_report(out)
    return ""


def main(argv: list[str] | None = None) -> int:
    """``python -m autotune.launcher.relaunch OUT``: print :func:`relaunch_argument`'s answer; exit 2 on bad use."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m autotune.launcher.relaunch OUTPUT_DIR", file=sys.stderr)
        return 2
    print(relaunch_argument(Path(args[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
