"""The calibration CSV template: the header and a ``#`` legend of every column, generated from the schemas.

:func:`csv_template` writes what :func:`autotune.profiles.measurement_csv.runs_from_csv` reads back (lines starting with
``#`` are comments); :func:`csv_with_rows` adds rows under it (``calibrate --suggest``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from autotune.profiles.csv_lines import COMMENT
from autotune.profiles.measurement_csv import CSV_COLUMNS, LORA_TARGETS_SEPARATOR, WORKLOAD_COLUMNS, column_schema
from autotune.schemas.setting import ALL_LINEAR


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _bound(schema: Mapping[str, Any]) -> str:
    parts = [
        f"{sign} {_number(schema[key])}"
        for key, sign in (("minimum", ">="), ("exclusiveMinimum", ">"), ("maximum", "<="), ("exclusiveMaximum", "<"))
        if key in schema
    ]
    return f" {', '.join(parts)}" if parts else ""


def _values(schema: Mapping[str, Any]) -> str:
    """The allowed values of a column, from its JSON schema (pydantic's), e.g. ``full|lora|qlora``."""
    if "anyOf" in schema:
        return " or ".join(_values(part) for part in schema["anyOf"] if part.get("type") != "null")
    if "enum" in schema:
        return "|".join(str(value) for value in schema["enum"])
    kind = schema.get("type")
    if kind == "boolean":
        return "true|false"
    if kind == "array":
        return f"names separated by '{LORA_TARGETS_SEPARATOR}' (q_proj{LORA_TARGETS_SEPARATOR}v_proj) or {ALL_LINEAR}"
    if kind in ("integer", "number"):
        return kind + _bound(schema)
    return "text"


def _default(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list | tuple):
        return LORA_TARGETS_SEPARATOR.join(str(part) for part in value)
    if isinstance(value, float):
        return _number(value)
    return str(value)


def column_legend(name: str) -> str:
    """One line for column ``name``: its allowed values, its default (or 'required') and its description.

    Generated from the pydantic schema that validates the column (:class:`CsvRow`, TrainingSetting, PaddedBatches).
    """
    json_schema = column_schema(name).model_json_schema()
    prop = json_schema["properties"][name]
    if name in json_schema.get("required", ()) and name not in WORKLOAD_COLUMNS:
        default = "required"
    elif prop.get("default") is None:
        default = "may be empty"
    else:
        default = f"default {_default(prop['default'])}"
    description = " ".join(str(prop.get("description", "")).split())
    return f"{name}: {_values(prop)} ({default}){' — ' + description if description else ''}"


def csv_template() -> str:
    """An empty calibration CSV: a legend of ``#`` comment lines (every column), then the header row.

    :func:`runs_from_csv` reads it back (no rows); a row added under the header is a run.
    """
    lines = [
        "autotune calibration CSV (docs/calibration.md): one row per run under the header; empty cells take the "
        "default; lines starting with # are comments.",
        *(column_legend(name) for name in CSV_COLUMNS),
    ]
    return "".join(f"{COMMENT} {line}\n" for line in lines) + ",".join(CSV_COLUMNS) + "\n"


def csv_with_rows(rows: Sequence[Mapping[str, Any]], header_note: str) -> str:
    """:func:`csv_template` with ``header_note`` as its first comment line and ``rows`` under the header.

    Each row maps columns to values, written as the legend writes defaults (``true``/``false``, ``;``-separated
    targets); columns a row does not give, and keys that are no column, are left out (empty cells).
    """
    lines = "".join(
        ",".join(_default(row[name]) if row.get(name) is not None else "" for name in CSV_COLUMNS) + "\n"
        for row in rows
    )
    return f"{COMMENT} {header_note}\n" + csv_template() + lines
