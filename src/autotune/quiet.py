"""Keep third-party noise off the user's terminal, so a user error stays one line.

The training stack prints on import and set-up: bitsandbytes 0.50 logs "Failed to load CPU
gemm_4bit_forward from kernels-community" on CPUs with AVX512-BF16 (``bitsandbytes/backends/cpu/ops.py``),
DeepSpeed logs which accelerator it picked, transformers and peft emit FutureWarnings, datasets and
huggingface_hub draw progress bars. None of that is for the user of ``autotune`` unless they ask for it,
and it must never turn "one line on stderr, exit code 2" into two lines.

:func:`quiet_third_party` is called by the CLI when a command is looked up (before the command's module is
imported; ``autotune --help`` needs none), first thing by the training core (before any heavy import), and
again after the heavy imports (libraries such as DeepSpeed reset their own logger level when they load). It

- sets the libraries' own verbosity switches (environment variables they read at import);
- raises every known library logger to ``ERROR`` and filters its records below ``ERROR`` (the filter
  stays when the library later resets the level);
- gives the root logger a handler that drops records from non-``autotune`` loggers below ``ERROR``,
  so Python's last-resort handler never prints a library's warning;
- ignores warnings attributed to modules outside ``autotune``.

Set ``AUTOTUNE_VERBOSE=1`` (``autotune launch --verbose`` does) to see everything.
"""

from __future__ import annotations

import logging
import os
import warnings
from typing import Final

VERBOSE_ENV: Final = "AUTOTUNE_VERBOSE"
"""Environment variable: any value other than empty / ``0`` keeps third-party output."""

THIRD_PARTY_LOGGERS: Final[tuple[str, ...]] = (
    "bitsandbytes",
    "transformers",
    "peft",
    "accelerate",
    "deepspeed",
    "DeepSpeed",
    "datasets",
    "huggingface_hub",
    "torch",
    "gguf",
    "filelock",
    "fsspec",
    "urllib3",
    "httpx",
    "matplotlib",
)
"""Loggers (and their children) raised to ERROR in quiet mode; ``DeepSpeed`` is DeepSpeed's own name
(``deepspeed/utils/logging.py``: ``LoggerFactory.create_logger(name="DeepSpeed")``)."""

QUIET_ENV: Final[dict[str, str]] = {
    "TRANSFORMERS_VERBOSITY": "error",
    "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
    "HF_DATASETS_DISABLE_PROGRESS_BARS": "1",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "TQDM_DISABLE": "1",
    "PYTHONWARNINGS": "ignore",
}
"""Switches the libraries read at import (transformers ``utils/logging.py``, datasets and huggingface_hub
``utils/tqdm.py``; ``TQDM_DISABLE`` for the bars drawn with tqdm directly, such as transformers' GGUF
de-quantization, read by tqdm >= 4.66's ``envwrap("TQDM_")``); set only where the user has not set them, so
child processes inherit them."""

_OWN_PREFIX: Final = "autotune"

_EXPORTED: set[str] = set()
"""The :data:`QUIET_ENV` variables this process set (not the user's), withdrawn when verbose is asked later."""


def set_by_user(name: str) -> bool:
    """Whether the environment variable ``name`` is set and was not set by :func:`quiet_third_party` (the user's)."""
    return name in os.environ and name not in _EXPORTED


def is_verbose() -> bool:
    """Whether the user asked for third-party output (``AUTOTUNE_VERBOSE`` set, not empty or ``0``)."""
    return os.environ.get(VERBOSE_ENV, "").strip() not in ("", "0")


def _is_own(name: str) -> bool:
    return name == _OWN_PREFIX or name.startswith(_OWN_PREFIX + ".")


class _OwnRecordsFilter(logging.Filter):
    """Pass autotune's records at any level and other loggers' records from ERROR up."""

    def filter(self, record: logging.LogRecord) -> bool:
        return _is_own(record.name) or record.levelno >= logging.ERROR


class _QuietRootHandler(logging.Handler):
    """Root handler of quiet mode: drops what the filter refuses, hands the rest to stderr."""

    def __init__(self) -> None:
        super().__init__(level=logging.NOTSET)
        self.addFilter(_OwnRecordsFilter())
        self._stream = logging.StreamHandler()
        self._stream.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self._stream.emit(record)


def quiet_third_party(verbose: bool | None = None) -> None:
    """Silence third-party logging, warnings and progress bars unless ``verbose`` (default: the env var).

    Idempotent; call it before the heavy imports and again after them. With ``verbose`` true it exports
    ``AUTOTUNE_VERBOSE=1`` and withdraws the :data:`QUIET_ENV` switches an earlier quiet call set (never the
    user's own), so that child processes (the trainer; ``autotune launch --verbose``) keep their output.
    """
    if verbose is None:
        verbose = is_verbose()
    if verbose:
        os.environ[VERBOSE_ENV] = "1"
        for name in sorted(_EXPORTED):
            os.environ.pop(name, None)
        _EXPORTED.clear()
        return
    for name, value in QUIET_ENV.items():
        if name not in os.environ:
            os.environ[name] = value
            _EXPORTED.add(name)
    filter_ = _OwnRecordsFilter()
    for name in THIRD_PARTY_LOGGERS:
        library_logger = logging.getLogger(name)
        library_logger.setLevel(logging.ERROR)
        # A filter on the logger object survives a library that resets its level and adds its own
        # handler when it loads (DeepSpeed's LoggerFactory.create_logger does both).
        if not any(isinstance(f, _OwnRecordsFilter) for f in library_logger.filters):
            library_logger.addFilter(filter_)
    root = logging.getLogger()
    for handler in root.handlers:
        if not any(isinstance(f, _OwnRecordsFilter) for f in handler.filters):
            handler.addFilter(filter_)
    if not any(isinstance(handler, _QuietRootHandler) for handler in root.handlers) and not root.handlers:
        root.addHandler(_QuietRootHandler())
    warnings.filterwarnings("ignore")
    warnings.filterwarnings("default", module=r"autotune(\.|$)")
