"""Entry point: ``python -m autotune.trainer --plan PLAN.yaml --dataset DATA --output-dir DIR [...]``.

User errors (:class:`autotune.errors.AutotuneError`) become one line on stderr and exit code 2 — also a loss that
became NaN/inf (:class:`~autotune.errors.TrainingDivergedError`, after the report is written); Ctrl-C
before training starts one line and exit code 130 — from the first line of :func:`main` on, imports and argument
parsing included; a run stopped by SIGINT / SIGTERM during training saves a checkpoint and exits 130 / 143
(128 + the signal); anything else is a bug and shows its traceback. (A SIGINT that arrives before Python has
installed its own handler kills the process; ``autotune launch`` then says so in one line.)
"""

from __future__ import annotations

import sys

INTERRUPTED = 130
"""128 + SIGINT: the shell's code for a process ended by Ctrl-C."""


def main(argv: list[str] | None = None) -> int:
    """Parse the command line, run the training core, return the process exit code."""
    output_dir = "the output directory"
    try:
        from autotune.errors import AutotuneError
        from autotune.quiet import quiet_third_party
        from autotune.trainer.args import parse_args

        quiet_third_party()  # before the training stack is imported: its import-time output is not for the user
        args = parse_args(argv)
        output_dir = str(args.output_dir)
        try:
            from autotune.trainer.train import run

            return run(args)
        except AutotuneError as error:
            message = " ".join(str(error).split())
            print(f"error: {message}", file=sys.stderr, flush=True)
            return 2
    except KeyboardInterrupt:  # Ctrl-C before training started (during training it stops at a step and saves)
        print(
            f"error: interrupted before training started; {output_dir} keeps what it held before "
            "(the plan and every finished checkpoint)",
            file=sys.stderr,
            flush=True,
        )
        return INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
