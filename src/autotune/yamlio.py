"""Safe, bounded loading of the YAML and JSON files autotune reads.

``yaml.CSafeLoader`` constructs exactly the same plain types as ``yaml.safe_load`` (no arbitrary Python
objects) but parses about 10× faster, which matters for ``autotune plan``'s cold start (it reads ~50
catalog files). Falls back to the pure-Python ``SafeLoader`` where PyYAML was built without libyaml.

Hostile files are bounded before anything is built from them: at most :data:`MAX_FILE_BYTES` bytes,
:data:`MAX_DEPTH` levels of nesting (libyaml's composer and ``json`` recurse once per level: a
50,000-deep YAML document overflows the C stack), and :data:`MAX_NODES` nodes once aliases are
expanded (a 2 KB "billion laughs" alias bomb expands to 10^9 nodes). The checks stream libyaml's
events (flat, no recursion) and count each anchor's expanded size once, so they cost one extra
parse. Integers past Python's 4,300-digit conversion limit, and every other malformed input, become
one ``ConfigError`` line.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from autotune.errors import ConfigError
from autotune.validation import format_validation_error

_SafeLoader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

MAX_FILE_BYTES = 64 * 1024 * 1024
"""Largest YAML / JSON file read (64 MiB; the largest shipped file is a few KB, a plan a few KB)."""
MAX_LINE_BYTES = 16 * 1024 * 1024
"""Longest line (one dataset row, one CSV record) read from a line-oriented file (16 MiB): about 4 million tokens of
English text at ~4 bytes per token, beyond the longest context of any catalog model, so only a file without line
breaks (or ``/dev/zero``) reaches it; :func:`bounded_lines` refuses it after reading this much, in constant memory."""
MAX_DEPTH = 100
"""Deepest nesting of mappings / lists accepted (plans and configs nest under 10 levels)."""
MAX_NODES = 1_000_000
"""Most nodes (scalars + collections) a YAML document may have with every alias expanded."""


class YamlLimitError(yaml.YAMLError):
    """A YAML document beyond the bounds (depth, expanded size); the message says which."""


SchemaT = TypeVar("SchemaT", bound=BaseModel)


def safe_load(text: str, *, shipped: bool = False) -> Any:
    """Parse YAML text with the safe loader, within :data:`MAX_DEPTH` and :data:`MAX_NODES`.

    ``shipped=True`` skips the bounds for files that are part of the package (the catalog), read
    on every cold start: the checks cost about a quarter of the parse and guard against files a
    user or someone else supplies.

    Raises:
        yaml.YAMLError: malformed input; :class:`YamlLimitError` for a document too deep, too large
            once aliases are expanded, or holding an integer too long to convert.
    """
    if not shipped:
        check_yaml_bounds(text)
    try:
        return yaml.load(text, Loader=_SafeLoader)
    except ValueError as error:  # int('9' * 5000): Python's integer string conversion limit
        raise YamlLimitError(" ".join(str(error).split())[:200]) from None
    except RecursionError:
        raise YamlLimitError(f"nested deeper than {MAX_DEPTH} levels") from None


def check_yaml_bounds(text: str) -> None:
    """Refuse YAML text that is too large, too deep or expands (through aliases) to too many nodes.

    Streams the parser's events (no recursion, no objects built): each collection's expanded size is
    1 + the sizes of its items; an alias counts as the expanded size of its anchor.

    Raises:
        YamlLimitError: beyond :data:`MAX_FILE_BYTES`, :data:`MAX_DEPTH` or :data:`MAX_NODES`.
        yaml.YAMLError: malformed YAML.
    """
    if len(text) > MAX_FILE_BYTES:
        raise YamlLimitError(f"larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB")
    anchored: dict[str, int] = {}
    stack: list[list[Any]] = [[None, 0]]  # [anchor, expanded size so far] per open collection; [0]: the stream
    for event in yaml.parse(text, Loader=_SafeLoader):
        if isinstance(event, yaml.CollectionStartEvent):
            if len(stack) > MAX_DEPTH:
                raise YamlLimitError(f"nested deeper than {MAX_DEPTH} levels")
            stack.append([event.anchor, 1])
            continue
        if isinstance(event, yaml.CollectionEndEvent):
            anchor, size = stack.pop()
        elif isinstance(event, yaml.ScalarEvent):
            anchor, size = event.anchor, 1
        elif isinstance(event, yaml.AliasEvent):
            anchor, size = None, anchored.get(event.anchor or "", 1)
        else:
            continue
        if anchor is not None:
            anchored[anchor] = size
        stack[-1][1] += size
        if stack[-1][1] > MAX_NODES:
            raise YamlLimitError(f"more than {MAX_NODES:,} nodes once aliases are expanded (an alias bomb?)")


def parse_json(text: str, origin: str, what: str) -> Any:
    """Parse JSON text within :data:`MAX_FILE_BYTES` and :data:`MAX_DEPTH`.

    Raises:
        ConfigError: malformed JSON (with line), too large, too deep, or an integer too long; one
            line starting with ``origin``.
    """
    if len(text) > MAX_FILE_BYTES:
        raise ConfigError(f"{origin}: {what} larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB")
    depth = json_depth(text)
    if depth > MAX_DEPTH:
        raise ConfigError(f"{origin}: {what} nested deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise ConfigError(f"{origin}: invalid JSON (line {error.lineno}: {error.msg})") from None
    except (ValueError, RecursionError) as error:
        raise ConfigError(f"{origin}: invalid JSON ({' '.join(str(error).split())[:200]})") from None


def json_depth(text: str) -> int:
    """The deepest nesting of ``[`` / ``{`` in JSON text, ignoring brackets inside strings (linear scan)."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def open_regular(path: str | Path, what: str) -> IO[bytes]:
    """Open a user-named file for reading in binary, only when it is a regular file (the one check for every reader).

    The file is opened non-blocking and checked on the open descriptor (``fstat``), so a FIFO never blocks the open
    and nothing can be swapped in between the check and the read: a FIFO, a device (a link to ``/dev/zero``), a
    socket or a directory is refused before one byte is read. Symbolic links to a regular file are followed.

    Raises:
        ConfigError: missing (also a dangling link), not a regular file, or unreadable — one line naming ``what``
            and the path.
    """
    file = Path(path).expanduser()
    try:
        fd = os.open(file, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        dangling = " (a link to a missing file)" if file.is_symlink() else ""
        raise ConfigError(f"{what} {file} not found{dangling}") from None
    except IsADirectoryError:
        raise ConfigError(f"{what} {file} is a directory, not a regular file: give a file") from None
    except OSError as error:
        raise ConfigError(f"{what} {file}: cannot read it ({error.strerror or error})") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise ConfigError(f"{what} {file} is {_kind(mode)}, not a regular file: give a file")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a named pipe (FIFO)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "a special file"


def check_regular_file(path: str | Path, what: str) -> None:
    """Refuse a path that :func:`open_regular` would refuse (opened and closed: nothing is read).

    Raises:
        ConfigError: see :func:`open_regular`.
    """
    open_regular(path, what).close()


def bounded_lines(handle: IO[bytes], name: str, limit: int = MAX_LINE_BYTES) -> Iterator[tuple[int, bytes]]:
    """The lines of ``handle`` with their 1-based numbers, each at most ``limit`` bytes, read in constant memory.

    Raises:
        ConfigError: a line longer than ``limit`` bytes (one line naming ``name``, the line number and the bound;
            at most ``limit + 1`` bytes of it were read).
    """
    number = 0
    while True:
        raw = handle.readline(limit + 1)
        if not raw:
            return
        number += 1
        if len(raw) > limit and not (len(raw) == limit + 1 and raw.endswith(b"\n")):
            raise ConfigError(
                f"{name} line {number}: longer than {limit // (1024 * 1024)} MiB (the bound on one line); is it "
                "missing its line breaks?"
            )
        yield number, raw


def read_text_file(path: str | Path, what: str) -> str:
    """The text of a user-supplied file (a regular file: :func:`open_regular`).

    Raises:
        ConfigError: missing, not a regular file, larger than :data:`MAX_FILE_BYTES`, unreadable or not
            UTF-8 — one line naming ``what`` and the path.
    """
    file = Path(path)
    with open_regular(file, what) as handle:
        try:
            if os.fstat(handle.fileno()).st_size > MAX_FILE_BYTES:
                raise ConfigError(f"{file}: {what} larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB")
            data = handle.read(MAX_FILE_BYTES + 1)
        except OSError as error:
            raise ConfigError(f"{file}: cannot read the {what}: {' '.join(str(error).split())}") from None
    if len(data) > MAX_FILE_BYTES:  # grew while read
        raise ConfigError(f"{file}: {what} larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ConfigError(f"{file}: cannot read the {what}: {' '.join(str(error).split())}") from None
    return text.replace("\r\n", "\n").replace("\r", "\n")  # universal newlines, as Path.read_text reads


def parse_mapping(text: str, origin: str, what: str) -> dict[str, Any]:
    """Parse YAML text that must be a mapping.

    Raises:
        ConfigError: malformed YAML (with line and column) or not a mapping; one line starting with ``origin``.
    """
    try:
        data = safe_load(text)
    except yaml.YAMLError as error:
        raise ConfigError(f"{origin}: malformed YAML{_yaml_position(error)}: {_yaml_problem(error)}") from None
    if not isinstance(data, dict):
        kind = "empty" if data is None else f"a {type(data).__name__}"
        raise ConfigError(f"{origin}: {what} is a YAML mapping, this one is {kind}")
    return data


def validate(schema: type[SchemaT], data: dict[str, Any], origin: str, what: str) -> SchemaT:
    """Validate a mapping against a pydantic schema.

    Raises:
        ConfigError: unknown keys (with close valid names), missing keys or bad values, on one line.
    """
    try:
        return schema.model_validate(data)
    except ValidationError as error:
        raise ConfigError(f"{origin}: invalid {what}: {format_validation_error(error, schema)}") from None


def load_validated(path: str | Path, schema: type[SchemaT], what: str) -> SchemaT:
    """Read, parse and validate a user-supplied YAML file (``read_text_file`` → ``parse_mapping`` → ``validate``)."""
    origin = str(path)
    return validate(schema, parse_mapping(read_text_file(path, what), origin, f"a {what}"), origin, what)


def _yaml_position(error: yaml.YAMLError) -> str:
    mark = getattr(error, "problem_mark", None)
    if mark is None:
        return ""
    return f" at line {mark.line + 1}, column {mark.column + 1}"


def _yaml_problem(error: yaml.YAMLError) -> str:
    problem = getattr(error, "problem", None)
    return str(problem) if problem else str(error).splitlines()[0]
