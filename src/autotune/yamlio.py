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
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from autotune.errors import ConfigError
from autotune.validation import format_validation_error

_SafeLoader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

MAX_FILE_BYTES = 64 * 1024 * 1024
"""Largest YAML / JSON file read (64 MiB; the largest shipped file is a few KB, a plan a few KB)."""
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


def read_text_file(path: str | Path, what: str) -> str:
    """The text of a user-supplied file.

    Raises:
        ConfigError: missing, a directory, larger than :data:`MAX_FILE_BYTES`, unreadable or not
            UTF-8 — one line naming ``what`` and the path.
    """
    file = Path(path)
    if not file.exists():
        raise ConfigError(f"{what} {file} not found")
    if not file.is_file():
        raise ConfigError(f"{what} {file} is not a file")
    try:
        if file.stat().st_size > MAX_FILE_BYTES:
            raise ConfigError(f"{file}: {what} larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB")
        return file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"{file}: cannot read the {what}: {' '.join(str(error).split())}") from None


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
