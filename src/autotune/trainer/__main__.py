"""Entry point: ``python -m autotune.trainer --plan PLAN.yaml --dataset DATA --output-dir DIR [...]``.

User errors (:class:`autotune.errors.AutotuneError`) become one line on stderr and exit code 2 — also a loss that
became NaN/inf (:class:`~autotune.errors.TrainingDivergedError`, after the report is written); Ctrl-C
before training starts one line and exit code 130 — from the first line of :func:`main` on, imports and argument
parsing included; a run stopped by SIGINT / SIGTERM during training saves a checkpoint and exits 130 / 143
(128 + the signal); anything else is a bug and shows its traceback. (A SIGINT that arrives before Python has
installed its own handler kills the process; ``autotune launch`` then says so in one line.)

However the run ends, the files under ``final/`` and ``checkpoints/`` get the modes the umask gives
(:func:`respect_umask`): safetensors writes its files 0600, while everything else is 0644 under the usual umask.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

INTERRUPTED = 130
"""128 + SIGINT: the shell's code for a process ended by Ctrl-C."""

WEIGHT_DIRECTORIES = ("final", "checkpoints")
"""Where the training stack writes weights (``TrainerArgs.final_dir`` and ``checkpoints_dir``)."""


def main(argv: list[str] | None = None) -> int:
    """Parse the command line, run the training core, return the process exit code."""
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even if the parent left SIGINT ignored or default
    output_dir: Path | None = None
    try:
        from autotune.errors import exit_code
        from autotune.quiet import quiet_third_party
        from autotune.trainer.args import parse_args

        quiet_third_party()  # before the training stack is imported: its import-time output is not for the user
        args = parse_args(argv)
        output_dir = args.run_dir
        try:
            from autotune.trainer.train import run

            return exit_code(lambda: run(args))
        finally:
            respect_umask(output_dir)
    except KeyboardInterrupt:  # Ctrl-C before training started (during training it stops at a step and saves)
        print(f"error: {interrupted_message(output_dir)}", file=sys.stderr, flush=True)
        return INTERRUPTED


def interrupted_message(output_dir: Path | None) -> str:
    """What a Ctrl-C before training left in ``output_dir``, in one line (true for a first launch and a resume)."""
    if output_dir is None:
        return "interrupted before training started; nothing was written"
    if not output_dir.exists():
        return f"interrupted before training started; nothing was written ({output_dir} does not exist)"
    checkpoints = output_dir / "checkpoints"
    finished = sorted(path.name for path in checkpoints.glob("checkpoint-*")) if checkpoints.is_dir() else []
    if finished:
        return (
            f"interrupted before training started; {output_dir} keeps its plan and every finished checkpoint "
            "(continue with --resume)"
        )
    return (
        f"interrupted before training started; {output_dir} holds no checkpoint (only the launch's files): "
        "run the same command again to start from step 0"
    )


def respect_umask(output_dir: Path | None) -> None:
    """Give the files under ``OUT/final`` and ``OUT/checkpoints`` created 0600 the umask's mode (``give_umask_mode``).

    Checkpoints get it as they are published (:func:`autotune.trainer.checkpoints.publish_checkpoint`); this covers
    the final weights and whatever a run that ended early left.
    """
    if output_dir is None:
        return
    from autotune.fileio import give_umask_mode

    for name in WEIGHT_DIRECTORIES:
        give_umask_mode(output_dir / name)


if __name__ == "__main__":
    sys.exit(main())
