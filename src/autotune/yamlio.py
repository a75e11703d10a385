"""Safe YAML loading: PyYAML's safe loader, in its libyaml (C) build when present.

``yaml.CSafeLoader`` constructs exactly the same plain types as ``yaml.safe_load`` (no arbitrary Python
objects) but parses about 10× faster, which matters for ``autotune plan``'s cold start (it reads ~50
catalog files). Falls back to the pure-Python ``SafeLoader`` where PyYAML was built without libyaml.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from autotune.errors import ConfigError

_SafeLoader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_MAX_ERRORS_SHOWN = 3
_MAX_INPUT_REPR = 40
SchemaT = TypeVar("SchemaT", bound=BaseModel)


def safe_load(text: str) -> Any:
    """Parse YAML text with the safe loader (raises ``yaml.YAMLError`` on malformed input)."""
    return yaml.load(text, Loader=_SafeLoader)


def read_text_file(path: str | Path, what: str) -> str:
    """The text of a user-supplied file.

    Raises:
        ConfigError: missing, a directory, or unreadable — one line naming ``what`` and the path.
    """
    file = Path(path)
    if not file.exists():
        raise ConfigError(f"{what} {file} not found")
    if not file.is_file():
        raise ConfigError(f"{what} {file} is not a file")
    try:
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


def format_validation_error(error: ValidationError, model: type[BaseModel]) -> str:
    """One line describing a pydantic error: unknown keys (with close valid names), missing keys, bad values.

    ``model`` is the class that was validated; it is used to list the valid keys at the place of an
    unknown one. At most three problems are spelled out; the rest are counted.
    """
    parts: list[str] = []
    # Unknown keys first: a misspelt key also shows up as a missing one, and the typo is the news.
    problems = sorted(error.errors(), key=lambda problem: problem["type"] != "extra_forbidden")
    for problem in problems[:_MAX_ERRORS_SHOWN]:
        loc = tuple(problem["loc"])
        where = ".".join(str(part) for part in loc)
        if problem["type"] == "extra_forbidden":
            parts.append(_unknown_key_message(where, loc, model))
        elif problem["type"] == "missing":
            parts.append(f"missing key '{where}'")
        else:
            message = problem["msg"]
            if message.startswith("Value error, "):
                message = message[len("Value error, ") :]
            shown = repr(problem.get("input"))
            if len(shown) > _MAX_INPUT_REPR:
                shown = shown[: _MAX_INPUT_REPR - 3] + "..."
            prefix = f"{where}: " if where else ""
            parts.append(f"{prefix}{message} (got {shown})")
    if len(problems) > _MAX_ERRORS_SHOWN:
        parts.append(f"and {len(problems) - _MAX_ERRORS_SHOWN} more")
    return "; ".join(parts)


def _unknown_key_message(where: str, loc: tuple[Any, ...], model: type[BaseModel]) -> str:
    valid = _field_names_at(model, loc[:-1])
    if not valid:
        return f"unknown key '{where}'"
    close = difflib.get_close_matches(str(loc[-1]), valid, n=1)
    hint = f"did you mean '{close[0]}'? " if close else ""
    return f"unknown key '{where}' ({hint}valid keys: {', '.join(valid)})"


def _field_names_at(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """Field names of the nested model reached by following ``loc`` from ``model`` (list indices skipped)."""
    current: type[BaseModel] = model
    for part in loc:
        if isinstance(part, int):
            continue
        field = current.model_fields.get(str(part))
        if field is None:
            return []
        nested = _model_in_annotation(field.annotation)
        if nested is None:
            return []
        current = nested
    return list(current.model_fields)


def _model_in_annotation(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model inside an annotation such as ``ModelSpec`` or ``list[Alternative]``."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for argument in getattr(annotation, "__args__", ()):
        found = _model_in_annotation(argument)
        if found is not None:
            return found
    return None


def _yaml_position(error: yaml.YAMLError) -> str:
    mark = getattr(error, "problem_mark", None)
    if mark is None:
        return ""
    return f" at line {mark.line + 1}, column {mark.column + 1}"


def _yaml_problem(error: yaml.YAMLError) -> str:
    problem = getattr(error, "problem", None)
    return str(problem) if problem else str(error).splitlines()[0]
