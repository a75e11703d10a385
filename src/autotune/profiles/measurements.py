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

from autotune import yamlio
from autotune.schemas.calibration import Measurement, MeasurementSet
from autotune.schemas.model import ModelSpec

CORE_SOURCE = "autotune-core-h100"
"""The project's own training core measured on one H100 (``autotune launch`` run directories in
``measurements/autotune-core-h100/``, transcribed by ``tools/ingest_core_runs.py``): the source the shipped
time fit describes and weights first (``time_fit``)."""

_PACKAGE = "autotune.profiles"
_DIRECTORY = "measurements"


def _parse(text: str, origin: str) -> MeasurementSet:
    """Validate YAML text as a :class:`MeasurementSet`.

    Raises:
        ConfigError: the text is not YAML, not a mapping, or does not match the schema (unknown keys
            included); the message names ``origin`` and fits on one line.
    """
    data = yamlio.parse_mapping(text, origin, "a measurement set")
    return yamlio.validate(MeasurementSet, data, origin, "measurement set")


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
    return yamlio.load_validated(path, MeasurementSet, "measurement set")


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


@cache
def measurement_models() -> dict[str, ModelSpec]:
    """Models that only measurement sets use (``measurements/models/*.yaml``), by key; not in the model catalog.

    E.g. the llm-foundry MPT yaml models written by ``tools/ingest_mpt.py``.
    """
    directory = resources.files(_PACKAGE).joinpath(_DIRECTORY).joinpath("models")
    if not directory.is_dir():
        return {}
    models = {}
    for entry in sorted(directory.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".yaml"):
            origin = f"{_DIRECTORY}/models/{entry.name}"
            data = yamlio.parse_mapping(entry.read_text(encoding="utf-8"), origin, "a model")
            model = yamlio.validate(ModelSpec, data, origin, "model")
            models[model.key] = model
    return models
