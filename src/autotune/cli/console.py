"""The CLI's two rich consoles, one home: ``console`` (stdout) and ``err_console`` (stderr).

``console`` takes tables and results; ``err_console`` takes notes, warnings, errors and progress, so that ``--json``
output on stdout stays clean.

On a terminal the stdout console draws at the terminal's width (``COLUMNS`` when set); when stdout is not a
terminal (a pipe, a file) it writes plain text at :data:`PIPE_WIDTH` columns, so nothing is wrapped or
cut (rich's ``TTY_COMPATIBLE=1`` / ``FORCE_COLOR`` make it treat the stream as a terminal).

Each is created on first use, so importing this module costs nothing (``autotune --help`` loads no rich).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from functools import cache
from typing import TYPE_CHECKING, Final

from autotune.session.progress import set_sink

if TYPE_CHECKING:
    from rich.console import Console

PIPE_WIDTH: Final[int] = 1000
"""Columns of the stdout console when stdout is not a terminal: wide enough that no line is wrapped."""

PIPE_RULE_WIDTH: Final[int] = 100
"""Columns of a horizontal rule (a section header) when stdout is not a terminal: a rule fills the console's width,
which :data:`PIPE_WIDTH` makes 1,000 box characters (about 3,000 bytes) in a pipe."""


def rule_width() -> int:
    """Columns for a horizontal rule on stdout: the terminal's width, or :data:`PIPE_RULE_WIDTH` in a pipe or file."""
    return min(console().width, PIPE_RULE_WIDTH) if not console().is_terminal else console().width


class StdoutClosed(Exception):
    """stdout's reader went away (``autotune models | head -1``); the entry point ends silently.

    Not an ``OSError``: click turns a broken pipe into exit code 1 before the entry point sees it.
    """


@cache
def console() -> Console:
    """The stdout console (no automatic highlighting: numbers keep the colour the markup gives them).

    A write to a closed pipe raises :class:`StdoutClosed` (rich's default ends the process with exit code 1).
    """
    from rich.console import Console

    class StdoutConsole(Console):
        def on_broken_pipe(self) -> None:
            raise StdoutClosed

    terminal = StdoutConsole(highlight=False)
    if terminal.is_terminal:
        return terminal
    return StdoutConsole(highlight=False, width=PIPE_WIDTH)


def print_plain(text: str) -> None:
    """Print ``text`` to stdout as it is (no rich); a closed pipe raises :class:`StdoutClosed`."""
    import sys

    try:
        print(text)
        sys.stdout.flush()
    except BrokenPipeError:
        raise StdoutClosed from None


@cache
def err_console() -> Console:
    """The stderr console (soft wrap: a one-line message stays one line however long)."""
    from rich.console import Console

    return Console(stderr=True, highlight=False, soft_wrap=True)


def note(message: str) -> None:
    """Print ``note: message`` on stderr (the message is markup-escaped)."""
    from rich.markup import escape

    err_console().print(f"[yellow]note:[/] {escape(message)}", highlight=False)


def warn(message: str) -> None:
    """Print ``warning: message`` on stderr (the message is markup-escaped)."""
    from rich.markup import escape

    err_console().print(f"[bold yellow]warning:[/] {escape(message)}", highlight=False)


def warn_eval_is_training_data(dataset: str | None, eval_dataset: str | None) -> None:
    """Warn (one line on stderr) when ``--eval-dataset`` is the ``--dataset`` itself.

    The rule: :func:`autotune.schemas.dataset_stats.eval_is_training_data`.
    """
    from autotune.schemas.dataset_stats import eval_is_training_data

    text = eval_is_training_data(dataset, eval_dataset)
    if text:
        warn(text)


class RichSink:
    """The session layer's progress on the stderr console (:mod:`autotune.session.progress`)."""

    def status(self, text: str) -> AbstractContextManager[object]:
        """Rich's spinner with ``text`` while a long step runs."""
        from rich.markup import escape

        return err_console().status(escape(text))

    def note(self, text: str) -> None:
        """``note: text`` on stderr (:func:`note`)."""
        note(text)

    def done(self, text: str) -> None:
        """``text`` on stderr, as it is."""
        err_console().print(text, highlight=False, markup=False)


set_sink(RichSink())
