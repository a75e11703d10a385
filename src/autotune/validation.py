"""One home for turning a pydantic ``ValidationError`` into one line for the user.

Every place that validates user input (YAML files, CLI options, ``--set`` overrides, run reports, CSV rows,
model configs) reports through :func:`format_validation_error`: unknown keys first (with the closest valid
name), then missing keys, then bad values with what was given; at most three problems spelled out.
Keys are shown as dotted paths (``setting.micro_batch_size``) or, for CLI options, as flags
(``--micro-batch-size``).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

_MAX_ERRORS_SHOWN = 3
_MAX_INPUT_REPR = 40


def format_validation_error(
    error: ValidationError,
    model: type[BaseModel] | None = None,
    *,
    flags: Mapping[str, str] | bool = False,
) -> str:
    """One line describing a pydantic error: unknown keys (with close valid names), missing keys, bad values.

    Args:
        error: what pydantic raised.
        model: the class that was validated; it lists the valid keys at the place of an unknown one
            (None: unknown keys are named without the list).
        flags: name top-level fields as CLI flags: ``True`` turns ``max_steps`` into ``--max-steps``; a
            mapping gives the flag of a field whose option is named differently (others as with ``True``).

    At most three problems are spelled out; the rest are counted.
    """
    names: Mapping[str, str] | None = None
    if flags:
        names = flags if isinstance(flags, Mapping) else {}
    parts: list[str] = []
    # Unknown keys first: a misspelt key also shows up as a missing one, and the typo is the news.
    problems = sorted(error.errors(), key=lambda problem: problem["type"] != "extra_forbidden")
    for problem in problems[:_MAX_ERRORS_SHOWN]:
        loc = tuple(problem["loc"])
        where = _where(loc, names)
        if problem["type"] == "extra_forbidden" and model is not None:
            parts.append(_unknown_key_message(where, loc, model))
        elif problem["type"] == "extra_forbidden":
            parts.append(f"unknown key '{where}'")
        elif problem["type"] == "missing":
            parts.append(f"missing key '{where}'")
        else:
            message = problem["msg"]
            if message.startswith("Value error, "):
                message = message[len("Value error, ") :]
            prefix = f"{where}: " if where else ""
            parts.append(f"{prefix}{message}{_given(problem.get('input'), bool(loc))}")
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


def _where(loc: tuple[Any, ...], flags: Mapping[str, str] | None) -> str:
    """The dotted key path, or the flag of a top-level field when ``flags`` is given."""
    if flags is not None and loc:
        field = str(loc[0])
        return flags.get(field, "--" + field.replace("_", "-"))
    return ".".join(str(part) for part in loc)


def _given(value: Any, has_location: bool) -> str:
    """`` (got VALUE)``, shortened; nothing for a whole-object error (its input is the entire mapping)."""
    if not has_location and isinstance(value, dict):
        return ""
    shown = repr(value)
    if len(shown) > _MAX_INPUT_REPR:
        shown = shown[: _MAX_INPUT_REPR - 3] + "..."
    return f" (got {shown})"
