"""The CLI's two rich consoles, one home: ``console`` (stdout: tables, results) and ``err_console`` (stderr:
notes, warnings, errors, progress — so ``--json`` output on stdout stays clean).

Each is created on first use, so importing this module costs nothing (``autotune --help`` loads no rich).
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console


@cache
def console() -> Console:
    """The stdout console (no automatic highlighting: numbers keep the colour the markup gives them)."""
    from rich.console import Console

    return Console(highlight=False)


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
