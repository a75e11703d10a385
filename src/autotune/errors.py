"""User-facing error types.

Every error a user can cause by their input is an :class:`AutotuneError`; the CLI catches it once
at the boundary and prints its message as one line on stderr with exit code 2, and so do the training core's
process entry points (``python -m autotune.trainer``, ``.export``, ``.lengths``) through :func:`exit_code`.
Anything else is a bug and is allowed to show a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

USER_ERROR_EXIT_CODE = 2
"""The exit code of a refusal (argparse's usage-error convention, and the CLI's)."""


class AutotuneError(Exception):
    """Base class of errors caused by user input; the message is one line meant for the user."""


class UnknownNameError(AutotuneError):
    """A model, GPU or calibration name that is not in the catalog (message lists close names)."""


class ConfigError(AutotuneError):
    """A file the user gave (config.json, plan.yaml, calibration YAML, dataset) is missing or malformed."""


class InvalidRequestError(AutotuneError):
    """Values that are out of range or contradict each other (names the fields and the fix)."""


class InfeasibleError(AutotuneError):
    """No setting fits under the user's constraints; the message carries the numbers."""


class RuntimeGuardError(AutotuneError):
    """What the training core set up differs from the plan (e.g. FSDP silently became DDP)."""


def first_line(error: BaseException) -> str:
    """The first line of an exception's message (its class name when the message is empty), for one-line errors."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def exit_code(action: Callable[[], int]) -> int:
    """Run a process entry point's work and return its exit code; an :class:`AutotuneError` is a refusal.

    The refusal is ``error: MESSAGE`` on stderr, its whitespace and line breaks collapsed to one line, and
    :data:`USER_ERROR_EXIT_CODE`: the one error mapping of the ``python -m autotune.trainer…`` entry points.
    """
    try:
        return action()
    except AutotuneError as error:
        print(f"error: {' '.join(str(error).split())}", file=sys.stderr, flush=True)
        return USER_ERROR_EXIT_CODE


class TrainingDivergedError(AutotuneError):
    """The training loss became NaN or infinite; the run stopped and its report says so (status ``failed``)."""
