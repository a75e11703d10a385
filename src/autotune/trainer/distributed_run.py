"""``torchrun`` and ``accelerate launch`` for ``autotune launch``: a failed worker ends in one line, not a traceback.

``python -m autotune.trainer.distributed_run torchrun ARGS...`` runs ``torch.distributed.run.main(ARGS)``;
``... accelerate ARGS...`` runs ``accelerate``'s CLI with ``ARGS`` (``launch --config_file ...``). Both raise
``ChildFailedError`` when a worker exits non-zero (torch 2.13 ``torch/distributed/elastic/multiprocessing/
errors``; accelerate 1.x ``commands/launch.py`` re-raises it), which Python prints as a traceback of the launcher
under the worker's own one-line ``error:``. Here it becomes one line naming the rank and its exit code, and the
exit code is the worker's (2 for a refusal, 128 + N for a worker killed by signal N). A signal that stops the
agent (``SignalException``, raised by torchrun's handler for SIGINT / SIGTERM / SIGHUP forwarded by the launcher)
ends with 128 + N and no traceback: the workers save a checkpoint and say so themselves.
"""

from __future__ import annotations

import logging
import sys

from autotune.quiet import is_verbose, quiet_third_party

LAUNCHERS = ("torchrun", "accelerate")

ELASTIC_LOGGER = "torch.distributed.elastic"
"""torchrun's agent logs each worker's failure at ERROR (``multiprocessing/api.py``); shown with ``--verbose``."""

REFUSED = 2
"""The training core's exit code for a user error, which it has printed as its one ``error:`` line."""


def main(argv: list[str] | None = None) -> int:
    """Run the launcher named by ``argv[0]`` with the rest; return the process exit code."""
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] not in LAUNCHERS:
        names = ",".join(LAUNCHERS)
        print(f"error: usage: python -m autotune.trainer.distributed_run {{{names}}} ARGS...", file=sys.stderr)
        return REFUSED
    quiet_third_party()
    if not is_verbose():  # the agent's "failed (exitcode: N) local_rank: ..." line repeats the one below
        logging.getLogger(ELASTIC_LOGGER).setLevel(logging.CRITICAL)
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    which, rest = args[0], args[1:]
    try:
        if which == "torchrun":
            from torch.distributed.run import main as torchrun_main

            torchrun_main(rest)
        else:
            from accelerate.commands.accelerate_cli import main as accelerate_main

            sys.argv = ["accelerate", *rest]
            accelerate_main()
    except ChildFailedError as error:
        rank, failure = error.get_first_failure()
        code = int(failure.exitcode)
        if code != REFUSED:  # a refusal is the worker's own one line already
            how = f"exit code {code}" if code >= 0 else f"killed by signal {-code}"
            print(
                f"error: training process rank {rank} failed ({how}); its own message, if any, is above "
                "(run_report.json in the output directory says failed when training had started)",
                file=sys.stderr,
                flush=True,
            )
        return code if code > 0 else 128 - code if code < 0 else 1
    except SignalException as error:
        return 128 + int(error.sigval)
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
