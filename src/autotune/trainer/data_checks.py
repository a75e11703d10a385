"""Dataset rows are what their format says before anything is tokenized: typed fields, something to learn.

The rule for a row is :mod:`autotune.schemas.dataset_rows` (one home, shared with ``autotune launch``).
A local JSONL / JSON / txt file is checked streamed, line by line, before ``datasets`` loads it
(:func:`check_local_file`), so a broken JSON line or invalid UTF-8 is one line naming the file's line, not a
library log line and a pyarrow error about another row; the rows of a hub dataset are checked once loaded
(:func:`check_rows`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from autotune.errors import ConfigError
from autotune.schemas.dataset_rows import check_dataset_file, has_learned_text, is_checked_file, row_error

logger = logging.getLogger("autotune.trainer")


def check_local_file(dataset: str, dataset_format: str) -> bool:
    """Check every row of a local JSONL / JSON / txt dataset, streamed (:func:`check_dataset_file`).

    Returns:
        True when the file's rows were checked here (the loaded rows need no second pass), False for a hub
        dataset, a parquet file or a ``.json`` too large to parse here.

    Raises:
        ConfigError: one line naming the file and the line (or record) of the first problem.
    """
    if not is_checked_file(dataset):
        return False
    summary = check_dataset_file(Path(dataset).expanduser(), dataset_format, dataset)
    if summary is None:
        return False
    _warn_empty(dataset, summary.empty_rows, summary.rows)
    return True


def check_rows(raw: Any, fmt: str, name: str) -> None:
    """Refuse a dataset whose rows do not hold the format's fields with the right types, or nothing to learn.

    Instruction: ``instruction`` and ``output`` strings (``input`` a string or null); text: ``text``
    strings; chat: ``messages`` lists of ``{role, content}`` with string values. Rows whose learned
    field is empty are counted; when every row is empty the dataset is refused; otherwise a warning
    names how many were empty.

    Raises:
        ConfigError: one line naming the dataset, the first bad row (1-based) and field.
    """
    empty = 0
    rows = 0
    for index, row in enumerate(_rows(raw, name), start=1):
        rows += 1
        error = row_error(row, fmt)
        if error:
            raise ConfigError(f"dataset {name} row {index}: {error}")
        empty += 0 if has_learned_text(row, fmt) else 1
    if rows == 0:
        raise ConfigError(f"dataset {name} has no rows")
    if empty == rows:
        raise ConfigError(f"dataset {name}: every one of its {rows} rows has nothing to learn (empty text)")
    _warn_empty(name, empty, rows)


def _warn_empty(name: str, empty: int, rows: int) -> None:
    if empty:
        logger.warning("dataset %s: %d of %d rows have nothing to learn (empty) and add no loss", name, empty, rows)


def _rows(raw: Any, name: str) -> Iterator[dict[str, Any]]:
    """The rows of ``raw``; a row that cannot be decoded becomes one ConfigError line."""
    iterator = iter(raw)
    index = 0
    while True:
        index += 1
        try:
            row = next(iterator)
        except StopIteration:
            return
        except (UnicodeDecodeError, ValueError, TypeError) as error:
            raise ConfigError(
                f"dataset {name} row {index}: cannot be read ({' '.join(str(error).split())[:200]})"
            ) from None
        yield row
