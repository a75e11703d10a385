"""What each row of a training dataset must hold, and a streamed check of a local dataset file.

One home for the row rule (:func:`row_error`, :func:`has_learned_text`), used by the launcher before it
creates the run directory (:func:`check_dataset_file`, the whole file streamed line by line) and by the
training core on the rows it loaded (``autotune.trainer.data_checks``, also for hub datasets).

``datasets`` reads a JSON line whose ``output`` is a number or a list as happily as a string, and the tokenizer
would then learn ``str()`` of it; an all-empty ``text`` column trains on end-of-text tokens alone; a broken
JSON line or invalid UTF-8 fails inside pyarrow with a library log line and the wrong row number. Each is
refused here with one line naming the file's line (JSONL, txt) or the record's index (a ``.json`` array).

Standard library only: the launcher runs this without the training stack.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final

from autotune.errors import ConfigError
from autotune.schemas.dataset_format import DATASET_LOADERS, detect_format
from autotune.yamlio import bounded_lines, open_regular

TEXT_FIELDS: Final[dict[str, tuple[str, ...]]] = {"instruction": ("instruction", "output"), "text": ("text",)}
"""String fields each format needs (``input`` of the instruction format is optional)."""

LEARNED_FIELD: Final[dict[str, str]] = {"instruction": "output", "text": "text"}
"""The field whose text is learned (chat: the assistant messages)."""

JSON_ARRAY_MAX_BYTES: Final[int] = 64 << 20
"""A ``.json`` dataset (one JSON document) larger than this is not parsed here (64 MiB, the bound of every file
autotune reads whole); the training core checks its rows after loading."""


@dataclass(frozen=True)
class DatasetSummary:
    """What the streamed check found: the format, the rows, and how many of them have nothing to learn."""

    fmt: str
    rows: int
    empty_rows: int


def row_error(row: Any, fmt: str) -> str | None:
    """Why ``row`` is not a row of format ``fmt``, or None.

    Instruction: ``instruction`` and ``output`` strings (``input`` a string or null); text: ``text`` a string;
    chat: ``messages`` a non-empty list of ``{role, content}`` objects with string values.
    """
    if not isinstance(row, dict):
        return f"is not a JSON object with named columns (got {type(row).__name__})"
    if fmt == "chat":
        return _chat_error(row.get("messages"))
    for field in TEXT_FIELDS[fmt]:
        error = _string_error(row.get(field), field)
        if error:
            return error
    if fmt == "instruction" and row.get("input") is not None:
        return _string_error(row.get("input"), "input")
    return None


def has_learned_text(row: dict[str, Any], fmt: str) -> bool:
    """True when a valid row (:func:`row_error` is None) has something to learn.

    That is a non-blank learned field (instruction ``output``, ``text``), or for chat a non-blank assistant message.
    """
    if fmt == "chat":
        return any(m.get("role") == "assistant" and str(m.get("content")).strip() for m in row["messages"])
    return bool(str(row.get(LEARNED_FIELD[fmt]) or "").strip())


def _string_error(value: Any, field: str) -> str | None:
    if isinstance(value, str):
        return None
    return f"'{field}' must be a string, got {type(value).__name__} ({_short(value)})"


def _chat_error(messages: Any) -> str | None:
    if not isinstance(messages, list) or not messages:
        return "'messages' must be a non-empty list of {role, content}"
    for message in messages:
        if not isinstance(message, dict):
            return "each message must be a {role, content} object"
        for field in ("role", "content"):
            error = _string_error(message.get(field), f"messages.{field}")
            if error:
                return error
    return None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def file_records(path: Path, name: str) -> Iterator[tuple[str, Any]]:
    """The records of a local ``.jsonl`` / ``.json`` / ``.txt`` file, streamed, each with where it is.

    Where: ``line N`` for JSONL and txt, 1-based, blank JSONL lines skipped; ``record N`` in a ``.json`` array.
    The file is opened only when it is a regular file (:func:`autotune.yamlio.open_regular`: a FIFO or a link to
    ``/dev/zero`` is refused, never read) and its lines are read at most :data:`autotune.yamlio.MAX_LINE_BYTES`
    long (:func:`autotune.yamlio.bounded_lines`), so memory stays bounded whatever the file holds.

    Raises:
        ConfigError: one line: missing, not a regular file or unreadable, a line over the bound, invalid UTF-8 or
            broken JSON (naming the line), a ``.json`` that is not an array of objects or a columnar object.
    """
    suffix = path.suffix.lower()
    try:
        with open_regular(path, "dataset") as handle:
            if suffix == ".json":
                yield from _json_records(handle, name)
                return
            for number, raw in bounded_lines(handle, f"dataset {name}"):
                yield from _line_record(raw, number, name, suffix)
    except OSError as error:
        raise ConfigError(f"dataset {name}: cannot read it ({error.strerror or error})") from None


def _line_record(raw: bytes, number: int, name: str, suffix: str) -> Iterator[tuple[str, Any]]:
    """The record of one JSONL / txt line (none for a blank JSONL line)."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ConfigError(
            f"dataset {name} line {number}: invalid UTF-8 (byte {error.start}); re-encode the file as UTF-8"
        ) from None
    if suffix == ".txt":
        yield f"line {number}", {"text": line.rstrip("\r\n")}
        return
    if not line.strip():
        return
    try:
        record = json.loads(line)
    except (json.JSONDecodeError, RecursionError) as error:
        reason = error.msg if isinstance(error, json.JSONDecodeError) else "nested too deeply"
        column = f", column {error.colno}" if isinstance(error, json.JSONDecodeError) else ""
        raise ConfigError(f"dataset {name} line {number}: not valid JSON ({reason}{column})") from None
    yield f"line {number}", record


def _json_records(handle: IO[bytes], name: str) -> Iterator[tuple[str, Any]]:
    if os.fstat(handle.fileno()).st_size > JSON_ARRAY_MAX_BYTES:
        return  # checked by the training core after loading
    try:
        data = json.loads(handle.read(JSON_ARRAY_MAX_BYTES + 1).decode("utf-8"))
    except UnicodeDecodeError as error:
        raise ConfigError(f"dataset {name}: invalid UTF-8 (byte {error.start}); re-encode the file as UTF-8") from None
    except json.JSONDecodeError as error:
        raise ConfigError(
            f"dataset {name} line {error.lineno}: not valid JSON ({error.msg}, column {error.colno})"
        ) from None
    except RecursionError:
        raise ConfigError(f"dataset {name}: not valid JSON (nested too deeply)") from None
    if isinstance(data, dict) and data and all(isinstance(value, list) for value in data.values()):
        columns = list(data)
        lengths = {len(data[column]) for column in columns}
        if len(lengths) != 1:
            raise ConfigError(f"dataset {name}: its columns have different lengths ({sorted(lengths)})")
        for index, values in enumerate(zip(*data.values(), strict=True), start=1):
            yield f"record {index}", dict(zip(columns, values, strict=True))
        return
    if not isinstance(data, list):
        raise ConfigError(f"dataset {name}: a .json dataset must be an array of records or an object of columns")
    for index, record in enumerate(data, start=1):
        yield f"record {index}", record


def is_checked_file(dataset: str) -> bool:
    """True for a local file whose rows :func:`check_dataset_file` reads.

    Those are ``.jsonl``, ``.json``, ``.txt``; parquet is binary and left to the loader.
    """
    path = Path(dataset).expanduser()
    return path.is_file() and path.suffix.lower() in DATASET_LOADERS and path.suffix.lower() != ".parquet"


def check_dataset_file(path: Path, dataset_format: str, name: str | None = None) -> DatasetSummary | None:
    """Stream every record of a local dataset file and check it (bounded memory for JSONL and txt).

    The format is ``dataset_format``, or detected from the first record's columns (``detect_format``).
    Returns None for a file not read here (parquet; a ``.json`` over :data:`JSON_ARRAY_MAX_BYTES`).

    Raises:
        ConfigError: one line naming the file and the line (or record) of the first problem: invalid UTF-8,
            broken JSON, a record that is not an object, a field of the wrong type; no rows; every row empty.
    """
    label = name or str(path)
    if path.suffix.lower() == ".parquet":
        return None
    fmt: str | None = None
    rows = empty = 0
    for where, record in file_records(path, label):
        if fmt is None:
            if not isinstance(record, dict):
                raise ConfigError(f"dataset {label} {where}: the record is not a JSON object with named columns")
            fmt = detect_format(list(record), dataset_format, label)
        error = row_error(record, fmt)
        if error:
            raise ConfigError(f"dataset {label} {where}: {error}")
        rows += 1
        empty += 0 if has_learned_text(record, fmt) else 1
    if fmt is None:
        if path.suffix.lower() == ".json" and path.stat().st_size > JSON_ARRAY_MAX_BYTES:
            return None
        raise ConfigError(f"dataset {label} has no rows")
    if empty == rows:
        raise ConfigError(f"dataset {label}: every one of its {rows} rows has nothing to learn (empty text)")
    return DatasetSummary(fmt=fmt, rows=rows, empty_rows=empty)
