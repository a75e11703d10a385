"""What the session layer tells a person while it works: a long step's status, a one-line note, a finished step.

The session layer (:mod:`autotune.session`) plans for the command line and for the Python API alike, so it prints
nothing itself: it reports to the sink set here. The default sink is silent (a notebook or a script gets the notes
in the returned results instead); the command line installs its rich stderr sink when its console module loads
(:mod:`autotune.cli.console`), so every command shows tokenizing progress and calibration notes on stderr.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import Protocol


class ProgressSink(Protocol):
    """Where the session's progress goes: ``status`` wraps a long step, ``note`` and ``done`` are one line each."""

    def status(self, text: str) -> AbstractContextManager[object]:
        """A context shown while a long step (tokenizing a dataset) runs."""
        ...

    def note(self, text: str) -> None:
        """A one-line note (which calibration file was taken)."""
        ...

    def done(self, text: str) -> None:
        """A one-line report of a finished long step."""
        ...


class SilentSink:
    """The default sink: reports nothing."""

    def status(self, text: str) -> AbstractContextManager[object]:
        """No status shown."""
        return nullcontext()

    def note(self, text: str) -> None:
        """No note shown."""

    def done(self, text: str) -> None:
        """Nothing shown."""


_sink: ProgressSink = SilentSink()


def set_sink(sink: ProgressSink) -> None:
    """Send the session's progress to ``sink`` from now on (the command line's stderr console)."""
    global _sink
    _sink = sink


def sink() -> ProgressSink:
    """The sink the session reports to now."""
    return _sink
