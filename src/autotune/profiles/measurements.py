"""Load measurement sets: the seed tables shipped with the package, or a user's own YAML file.

The shipped sets live in ``autotune/profiles/measurements/*.yaml``, one :class:`MeasurementSet` per
file, file name = ``name``. Each file copies its source's stated conditions verbatim and records every
mapping assumption in its rows' ``notes`` (and, for assumptions shared by all rows, at the end of
``conditions`` under "Notes on the mapping (ours, not the source's)").
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from autotune import yamlio
from autotune.errors import ConfigError
from autotune.schemas.calibration import Measurement, MeasurementSet

_PACKAGE = "autotune.profiles"
_DIRECTORY = "measurements"


def _one_line(text: str) -> str:
    """Collapse whitespace (newlines included) so an error message stays on one line."""
    return " ".join(text.split())


def _validation_summary(error: ValidationError) -> str:
    """``loc: message`` for every problem pydantic found, joined on one line."""
    parts = []
    for problem in error.errors():
        location = ".".join(str(part) for part in problem["loc"]) or "(top level)"
        parts.append(f"{location}: {problem['msg']}")
    return "; ".join(parts)


def _parse(text: str, origin: str) -> MeasurementSet:
    """Validate YAML text as a :class:`MeasurementSet`.

    Raises:
        ConfigError: the text is not YAML, not a mapping, or does not match the schema (unknown keys
            included); the message names ``origin`` and fits on one line.
    """
    try:
        data: Any = yamlio.safe_load(text)
    except yaml.YAMLError as error:
        raise ConfigError(f"{origin}: not valid YAML: {_one_line(str(error))}") from error
    if not isinstance(data, dict):
        raise ConfigError(
            f"{origin}: expected a mapping with keys name, source, conditions, measurements; got {type(data).__name__}"
        )
    try:
        return MeasurementSet.model_validate(data)
    except ValidationError as error:
        raise ConfigError(f"{origin}: not a valid measurement set: {_one_line(_validation_summary(error))}") from error


def load_measurement_set(path: str | Path) -> MeasurementSet:
    """Read and validate a user-supplied measurement-set YAML file.

    Args:
        path: the YAML file (same format as the shipped ``profiles/measurements/*.yaml``).

    Returns:
        The validated set.

    Raises:
        ConfigError: the file is missing or unreadable, is not valid YAML, or does not match the
            :class:`MeasurementSet` schema (unknown keys are rejected). One line naming the file.
    """
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError as error:
        raise ConfigError(f"{file}: measurement file not found") from error
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"{file}: cannot read measurement file: {_one_line(str(error))}") from error
    return _parse(text, str(file))


@cache
def _shipped_sets() -> tuple[MeasurementSet, ...]:
    """Every shipped set, parsed once per process, sorted by file name."""
    directory = resources.files(_PACKAGE).joinpath(_DIRECTORY)
    files = sorted((entry for entry in directory.iterdir() if entry.name.endswith(".yaml")), key=lambda e: e.name)
    return tuple(_parse(entry.read_text(encoding="utf-8"), f"{_DIRECTORY}/{entry.name}") for entry in files)


def list_measurement_sets() -> list[MeasurementSet]:
    """The measurement sets shipped with autotune (the transcribed seed tables), sorted by file name.

    Files are read with ``importlib.resources`` and parsed once per process (cached); the returned
    objects are shared between calls, so treat them as read-only.

    Raises:
        ConfigError: a shipped file is malformed (a packaging bug; the message names the file).
    """
    return list(_shipped_sets())


def all_measurements() -> list[Measurement]:
    """Every row of every shipped measurement set, in file order then row order."""
    return [row for measurement_set in _shipped_sets() for row in measurement_set.measurements]
