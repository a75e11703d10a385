"""Read and write plan files (``plan.yaml``): YAML of :class:`autotune.schemas.plan.PlanFile`.

Reading is ``yaml.safe_load`` → :func:`autotune.schemas.plan.migrate` → pydantic validation; every
problem (missing file, malformed YAML, unknown keys, wrong types, a newer schema) becomes one
:class:`~autotune.errors.ConfigError` line that names the file. Writing never replaces an existing
file unless asked to. Pure and light (PyYAML + pydantic): the training core imports this module too.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from autotune import yamlio
from autotune.errors import ConfigError, InvalidRequestError
from autotune.schemas.plan import PlanFile, migrate

_MAX_ERRORS_SHOWN = 3
_MAX_INPUT_REPR = 40

_HEADER = (
    "# autotune plan: read by `autotune launch` and by the training core (python -m autotune.trainer).\n"
    "# Unknown keys are rejected; override fields at launch with --set key=value.\n"
)


def plan_to_yaml(plan: PlanFile) -> str:
    """Serialize a plan to YAML text (a comment header, then the fields in schema order).

    The output is deterministic, and :func:`plan_from_yaml` of it gives back an equal plan.
    """
    data = plan.model_dump(mode="json")
    return _HEADER + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)


def plan_from_yaml(text: str, source: str) -> PlanFile:
    """Parse, migrate and validate plan YAML text.

    Args:
        text: the YAML document.
        source: what to call the text in error messages (usually the file path).

    Raises:
        ConfigError: malformed YAML, not a mapping, no/newer ``schema_version``, unknown keys or
            invalid values; one line starting with ``source``.
    """
    try:
        data = yamlio.safe_load(text)
    except yaml.YAMLError as error:
        raise ConfigError(
            f"{source}: malformed YAML{_yaml_position(error)}: {_yaml_problem(error)}"
        ) from None
    if not isinstance(data, dict):
        kind = "empty" if data is None else f"a {type(data).__name__}"
        raise ConfigError(f"{source}: a plan file is a YAML mapping, this one is {kind}")
    try:
        data = migrate(data)
    except ConfigError as error:
        raise ConfigError(f"{source}: {error}") from None
    try:
        return PlanFile.model_validate(data)
    except ValidationError as error:
        raise ConfigError(f"{source}: invalid plan: {format_validation_error(error, PlanFile)}") from None


def load_plan(path: str | Path) -> PlanFile:
    """Load a plan file written by ``autotune plan -o`` (or by ``autotune launch`` into a run directory).

    Raises:
        ConfigError: the file is missing, unreadable, malformed or invalid (one line naming it).
    """
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"plan file {path} not found")
    if not path.is_file():
        raise ConfigError(f"plan file {path} is not a file")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"{path}: cannot read the plan file: {error}") from None
    return plan_from_yaml(text, str(path))


def save_plan(plan: PlanFile, path: str | Path, *, overwrite: bool = False) -> Path:
    """Write ``plan`` as YAML to ``path`` and return the path.

    Without ``overwrite`` the file is created exclusively (``open(..., "x")``), so an existing file
    is never replaced, even by a concurrent writer.

    Raises:
        InvalidRequestError: ``path`` exists and ``overwrite`` is false.
        ConfigError: the directory does not exist or the file cannot be written.
    """
    path = Path(path)
    if not path.parent.is_dir():
        raise ConfigError(f"cannot write plan {path}: directory {path.parent} does not exist")
    text = plan_to_yaml(plan)
    try:
        with path.open("w" if overwrite else "x", encoding="utf-8") as handle:
            handle.write(text)
    except FileExistsError:
        raise InvalidRequestError(
            f"{path} already exists; refusing to overwrite it (choose another path or remove it first)"
        ) from None
    except OSError as error:
        raise ConfigError(f"cannot write plan {path}: {error}") from None
    return path


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
