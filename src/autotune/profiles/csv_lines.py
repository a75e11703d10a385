"""The lines of a measurements CSV, streamed in constant memory, and a progress bar for long ones (``calibrate``).

``csv.DictReader`` takes any iterable of lines: :class:`CsvLines` hands it the file's lines one by one, leaving out
comment lines (the template's legend) and blank lines above the header, and remembers the file line number of the
last one for error messages. :func:`read_progress` shows a rich progress bar on stderr while a large file is read.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from autotune.errors import ConfigError
from autotune.yamlio import bounded_lines

COMMENT = "#"
"""A line whose first non-blank character is this is a comment (the template's legend); the reader skips it."""

PROGRESS_MIN_BYTES = 1 << 20
"""A CSV larger than this (1 MiB, about 20,000 rows) is read with a progress bar on stderr (rich)."""

PROGRESS_STEP_BYTES = 1 << 18
"""The bar moves and is redrawn once per this many bytes read (256 KiB, about 5,000 rows)."""


@dataclass
class CsvLines:
    """A CSV file's lines that are not comments, from the first non-blank one, streamed for ``csv.reader``.

    Lines are read at most ``yamlio.MAX_LINE_BYTES`` long (:func:`autotune.yamlio.bounded_lines`), so memory stays
    bounded; ``number`` is the file line number of the last line handed out (what a row's error names).
    """

    file: Path
    handle: IO[bytes]
    advance: Callable[[int], None]
    number: int = 0

    def __iter__(self) -> Iterator[str]:
        """The lines (with their line breaks), decoded as UTF-8 (a BOM dropped); one ConfigError line if not UTF-8."""
        started = False
        for number, raw in bounded_lines(self.handle, str(self.file)):
            self.advance(len(raw))
            try:
                line = raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as error:
                raise ConfigError(f"{self.file}: line {number} is not UTF-8 (byte {error.start})") from None
            if line.lstrip().startswith(COMMENT) or not (started or line.strip()):
                continue  # a comment, or a blank line above the header
            started = True
            self.number = number
            yield line


@contextlib.contextmanager
def read_progress(file: Path, size_bytes: int) -> Iterator[Callable[[int], None]]:
    """A function to call with each line's bytes: a rich progress bar on stderr for a file over PROGRESS_MIN_BYTES."""
    if size_bytes <= PROGRESS_MIN_BYTES:
        yield lambda _bytes: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

    columns = (TextColumn("reading {task.description}"), BarColumn(), DownloadColumn(), TimeRemainingColumn())
    # redrawn when it moves, not by rich's refresh thread (which took the reader's interpreter lock half the time)
    with Progress(*columns, console=Console(stderr=True), transient=True, auto_refresh=False) as bar:
        task = bar.add_task(file.name, total=size_bytes)
        pending = [0]

        def advance(read: int) -> None:
            pending[0] += read
            if pending[0] >= PROGRESS_STEP_BYTES:  # the bar's lock and clock once per step, not once per line
                bar.update(task, advance=pending[0], refresh=True)
                pending[0] = 0

        yield advance
