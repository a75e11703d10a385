"""Dataset rows are what their format says before anything is tokenized: typed fields, something to learn.

``datasets`` reads a JSON line whose ``output`` is a number or a list as happily as a string, and
the tokenizer would then learn ``str()`` of it; an all-empty ``text`` column trains on end-of-text
tokens alone and reports success. :func:`check_rows` refuses both with one line naming the row.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from autotune.errors import ConfigError

logger = logging.getLogger("autotune.trainer")

TEXT_FIELDS: dict[str, tuple[str, ...]] = {"instruction": ("instruction", "output"), "text": ("text",)}
"""String fields each format needs (``input`` of the instruction format is optional)."""


TEXT_SUFFIXES = (".jsonl", ".json", ".txt")


def check_encoding(dataset: str) -> None:
    """Refuse a local text dataset (JSONL / JSON / txt) with bytes that are not UTF-8, naming the line.

    ``datasets`` reads such a file lazily (pyarrow keeps the bytes) and fails with a traceback when
    the row is first used; this reads the file once, line by line (bounded memory), before loading.
    Hub names and other file types are left to the loader.

    Raises:
        ConfigError: the first line holding invalid UTF-8, with the byte offset in it.
    """
    path = Path(dataset).expanduser()
    if path.suffix.lower() not in TEXT_SUFFIXES or not path.is_file():
        return
    try:
        with path.open("rb") as handle:
            for number, line in enumerate(handle, start=1):
                try:
                    line.decode("utf-8")
                except UnicodeDecodeError as error:
                    raise ConfigError(
                        f"dataset {dataset} line {number}: invalid UTF-8 (byte {error.start}); "
                        "re-encode the file as UTF-8"
                    ) from None
    except OSError as error:
        raise ConfigError(f"dataset {dataset}: cannot read it ({' '.join(str(error).split())})") from None


def check_rows(raw: Any, fmt: str, name: str) -> None:
    """Refuse a dataset whose rows do not hold the format's fields with the right types, or nothing to learn.

    Instruction: ``instruction`` and ``output`` strings (``input`` a string or null); text: ``text``
    strings; chat: ``messages`` lists of ``{role, content}`` with string values. Rows whose learned
    field is empty are counted; when every row is empty the dataset is refused; otherwise a warning
    names how many were empty.

    Raises:
        ConfigError: one line naming the dataset, the first bad row (1-based) and field.
    """
    learned_field = {"instruction": "output", "text": "text"}.get(fmt)
    empty = 0
    rows = 0
    for index, row in enumerate(_rows(raw, name), start=1):
        rows += 1
        if fmt == "chat":
            empty += _check_chat(row.get("messages"), name, index)
            continue
        for field in TEXT_FIELDS[fmt]:
            _check_string(row.get(field), name, index, field, optional=False)
        if fmt == "instruction":
            _check_string(row.get("input"), name, index, "input", optional=True)
        if learned_field is not None and not str(row.get(learned_field) or "").strip():
            empty += 1
    if rows == 0:
        raise ConfigError(f"dataset {name} has no rows")
    if empty == rows:
        raise ConfigError(f"dataset {name}: every one of its {rows} rows has nothing to learn (empty text)")
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


def _check_string(value: Any, name: str, index: int, field: str, *, optional: bool) -> None:
    if value is None and optional:
        return
    if not isinstance(value, str):
        raise ConfigError(
            f"dataset {name} row {index}: '{field}' must be a string, got {type(value).__name__} ({_short(value)})"
        )


def _check_chat(messages: Any, name: str, index: int) -> int:
    """Check one conversation; return 1 when it has no non-empty assistant message."""
    if not isinstance(messages, list) or not messages:
        raise ConfigError(f"dataset {name} row {index}: 'messages' must be a non-empty list of {{role, content}}")
    learned = False
    for message in messages:
        if not isinstance(message, dict):
            raise ConfigError(f"dataset {name} row {index}: each message must be a {{role, content}} object")
        for field in ("role", "content"):
            _check_string(message.get(field), name, index, f"messages.{field}", optional=False)
        learned = learned or (message.get("role") == "assistant" and bool(str(message.get("content")).strip()))
    return 0 if learned else 1


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
