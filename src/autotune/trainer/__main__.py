"""Entry point: ``python -m autotune.trainer --plan PLAN.yaml --dataset DATA --output-dir DIR [...]``.

User errors (:class:`autotune.errors.AutotuneError`) become one line on stderr and exit code 2 — also a loss that
became NaN/inf (:class:`~autotune.errors.TrainingDivergedError`, after the report is written); Ctrl-C
before training starts one line and exit code 130; a run stopped by SIGINT / SIGTERM during training saves a
checkpoint and exits 130 / 143 (128 + the signal); anything else is a bug and shows its traceback.
"""

from __future__ import annotations

import sys

from autotune.errors import AutotuneError
from autotune.quiet import quiet_third_party
from autotune.trainer.args import parse_args


def main(argv: list[str] | None = None) -> int:
    """Parse the command line, run the training core, return the process exit code."""
    quiet_third_party()  # before the training stack is imported: its import-time output is not for the user
    args = parse_args(argv)
    try:
        from autotune.trainer.train import run

        code = run(args)
    except AutotuneError as error:
        message = " ".join(str(error).split())
        print(f"error: {message}", file=sys.stderr, flush=True)
        return 2
    except KeyboardInterrupt:  # Ctrl-C before training started (during training it stops at a step and saves)
        print(
            f"error: interrupted before training started; {args.output_dir} keeps what it held before "
            "(the plan and every finished checkpoint)",
            file=sys.stderr,
            flush=True,
        )
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
