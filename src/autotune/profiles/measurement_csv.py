"""CSV files of measurements (one row per run; format in docs/calibration.md) read as measurements.

The columns come from three schemas, so each is declared once: :class:`CsvRow` (the run: model, GPU, method,
sequence length, the two settings whose default depends on the GPUs, and what was measured), every other field
of :class:`~autotune.schemas.setting.TrainingSetting` (:data:`SETTING_COLUMNS`, with the setting's defaults) and
``tokens_per_sample`` of the workload's :class:`~autotune.schemas.workload.PaddedBatches`
(:data:`WORKLOAD_COLUMNS`: a row that gives it ran padded batches of that mean length; packed or filled sequences
leave it empty). ``profiles.csv_template`` writes the header and a legend generated from the same schemas; lines
starting with ``#`` are comments, so the reader takes it back.
"""

from __future__ import annotations

import csv
import difflib
import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from autotune.errors import AutotuneError, ConfigError
from autotune.profiles.catalog import resolve_gpu
from autotune.profiles.csv_lines import CsvLines, read_progress
from autotune.profiles.model_source import resolve_model_source
from autotune.schemas._base import StrictModel
from autotune.schemas.calibration import MeasuredMemoryGiB, MeasuredStepS, Measurement, MemoryKind
from autotune.schemas.model import ModelSpec
from autotune.schemas.setting import (
    DESCRIPTIONS,
    Method,
    Precision,
    Sharding,
    TrainingSetting,
    default_precision,
    default_sharding,
)
from autotune.schemas.workload import PaddedBatches, Workload
from autotune.validation import format_validation_error
from autotune.yamlio import open_regular

LORA_TARGETS_SEPARATOR = ";"
"""Separates the module names of a ``lora_targets`` cell (``q_proj;v_proj``): a comma would split the CSV cell."""


class CsvRow(StrictModel):
    """The run columns of one CSV row (one run); the setting and workload columns are validated by their schemas."""

    id: str | None = Field(
        default=None,
        min_length=1,
        max_length=100,
        description="A label for the row in calibrate's table (default: FILE-STEM-rowN; repeated ids get -2, -3...).",
    )
    model: str = Field(
        description="Model: a catalog key or alias, a Hugging Face repo id the catalog knows, a config.json, a model "
        "directory or a .gguf file (a relative path is read from the CSV file's folder)."
    )
    gpu: str = Field(description="GPU catalog key or alias.")
    num_gpus: int = Field(default=1, ge=1, le=64, description="GPUs (one node).")
    method: Method = Field(description=DESCRIPTIONS["method"])
    seq_len: int = Field(ge=8, le=1_048_576, description=DESCRIPTIONS["seq_len"])
    sharding: Sharding | None = Field(default=None, description="Default: none on one GPU, ddp on several.")
    precision: Precision | None = Field(default=None, description="Default: bf16 if the GPU has it, else fp16-mixed.")
    # the measured figures' ranges are Measurement's (schemas/calibration.py), for every calibration input
    peak_memory_gib: MeasuredMemoryGiB | None = Field(
        default=None, description=Measurement.model_fields["peak_memory_gib"].description
    )
    memory_kind: MemoryKind | None = Field(
        default=None,
        description="Required with peak_memory_gib: allocated (torch.cuda.max_memory_allocated), reserved "
        "(max_memory_reserved), nvidia-smi, or unknown (validated, not fitted).",
    )
    micro_step_time_s: MeasuredStepS | None = Field(
        default=None, description="Median forward + backward of one micro batch, seconds."
    )
    step_time_s: MeasuredStepS | None = Field(
        default=None, description="Median optimizer step, seconds (used when no micro-step time is given)."
    )
    oom: bool = Field(default=False, description="The run went out of memory (then leave memory and times empty).")


FIRST_MEASURED_COLUMN = "peak_memory_gib"
"""The first :class:`CsvRow` field that is a measured figure: the setting and workload columns come before it."""

SETTING_COLUMNS: tuple[str, ...] = tuple(
    name for name in TrainingSetting.model_fields if name not in CsvRow.model_fields
)
"""The setting's fields that :class:`CsvRow` does not hold: validated by TrainingSetting, with its defaults."""

WORKLOAD_COLUMNS: tuple[str, ...] = ("tokens_per_sample",)
"""Workload fields a row may give, by their flat names (``Workload`` reads them into its batches; seq_len is a run
column; the global batch is micro × accumulation × GPUs). Each is a field of :class:`PaddedBatches`, which a row
runs only when it gives it: the column may be empty."""

_RUN = tuple(CsvRow.model_fields)
_SPLIT = _RUN.index(FIRST_MEASURED_COLUMN)
CSV_COLUMNS: tuple[str, ...] = (*_RUN[:_SPLIT], *WORKLOAD_COLUMNS, *SETTING_COLUMNS, *_RUN[_SPLIT:])
"""Every column, in the template's order."""

CSV_REQUIRED: tuple[str, ...] = tuple(name for name, info in CsvRow.model_fields.items() if info.is_required())


def column_schema(name: str) -> type[BaseModel]:
    """The schema that validates column ``name`` (and holds its type, default and description)."""
    if name in WORKLOAD_COLUMNS:
        return PaddedBatches
    return TrainingSetting if name in SETTING_COLUMNS else CsvRow


@dataclass(frozen=True)
class CsvRun:
    """One row read: its measurement and the architecture its ``model`` cell names (catalog entry or file)."""

    measurement: Measurement
    model: ModelSpec


def _row_error(path: Path, row: int, line: int, column: str, message: str) -> ConfigError:
    return ConfigError(f"{path}: row {row} (line {line}), column {column}: {message}")


def _error_column(error: ValidationError, fallback: str) -> str:
    loc = error.errors()[0]["loc"]
    return str(loc[0]) if loc else fallback


def _lora_targets(cell: str) -> tuple[str, ...]:
    """A ``lora_targets`` cell as the setting's tuple (names separated by :data:`LORA_TARGETS_SEPARATOR`).

    Raises:
        ValueError: the cell separates names with commas.
    """
    if "," in cell:
        raise ValueError(f"separate module names with '{LORA_TARGETS_SEPARATOR}' (q_proj;v_proj), not ','")
    return tuple(part.strip() for part in cell.split(LORA_TARGETS_SEPARATOR) if part.strip())


def _csv_run(path: Path, row: int, line: int, cells: Mapping[str, str], resolve: _Resolver) -> CsvRun:
    """Validate one row's non-empty cells and build its measurement (errors name file, row and column)."""

    def fail(column: str, message: str) -> ConfigError:
        return _row_error(path, row, line, column, message)

    run_cells = {k: v for k, v in cells.items() if column_schema(k) is CsvRow}
    setting_cells: dict[str, Any] = {k: v for k, v in cells.items() if k in SETTING_COLUMNS}
    workload_cells = {k: v for k, v in cells.items() if k in WORKLOAD_COLUMNS}
    try:
        parsed = CsvRow.model_validate(run_cells)
    except ValidationError as error:
        raise fail(_error_column(error, "?"), format_validation_error(error, CsvRow)) from None
    try:
        gpu = resolve.gpu(parsed.gpu)
    except AutotuneError as error:
        raise fail("gpu", str(error)) from None
    try:
        source = resolve.model(parsed.model)
    except AutotuneError as error:
        raise fail("model", str(error)) from None
    broken = _measured_rule(parsed.model_dump(include=set(MEASURED_COLUMNS)))
    if broken is not None:
        raise fail(*broken)
    if "lora_targets" in setting_cells:
        try:
            setting_cells["lora_targets"] = _lora_targets(setting_cells["lora_targets"])
        except ValueError as error:
            raise fail("lora_targets", str(error)) from None
    try:
        setting = TrainingSetting.model_validate(
            {
                **setting_cells,
                "method": parsed.method,
                "sharding": parsed.sharding or default_sharding(parsed.num_gpus),
                "precision": parsed.precision or default_precision(gpu.supports_bf16),
            }
        )
    except ValidationError as error:
        raise fail(_error_column(error, "method/precision"), format_validation_error(error)) from None
    try:
        workload = Workload.model_validate(
            {
                **workload_cells,
                "seq_len": parsed.seq_len,
                "global_batch_size": setting.sequences_per_step(parsed.num_gpus),
            }
        )
    except ValidationError as error:  # a column's field may sit in the workload's batches: the last name is its own
        column = next(reversed(error.errors()[0]["loc"]), "?")
        raise fail(str(column), format_validation_error(error)) from None
    match workload.batches:
        case PaddedBatches(tokens_per_sample=mean) if mean > parsed.seq_len:
            raise fail(
                "tokens_per_sample",
                f"{mean:g} is more than seq_len {parsed.seq_len} (the mean real tokens of a sequence; leave it empty "
                "for packed or filled sequences)",
            )
    measurement = Measurement(
        id=parsed.id or _row_id(path, row),
        source=f"{path} row {row}",
        model=str(source.path) if source.path is not None else source.spec.key,
        gpu=gpu.key,
        num_gpus_per_node=parsed.num_gpus,
        setting=setting,
        workload=workload,
        oom=parsed.oom,
        peak_memory_gib=parsed.peak_memory_gib,
        memory_kind=parsed.memory_kind or "unknown",
        micro_step_time_s=parsed.micro_step_time_s,
        step_time_s=parsed.step_time_s,
    )
    return CsvRun(measurement, source.spec)


MEASURED_COLUMNS: tuple[str, ...] = ("id", *_RUN[_SPLIT:])
"""The columns that differ between replicates of one setting (the row's label and what was measured)."""


def _row_id(path: Path, row: int, stem: str | None = None) -> str:
    """A row's default id, FILE-STEM-rowN (``stem``: the file's, when known)."""
    return f"{stem or path.stem}-row{row}"


def _measured_rule(values: Mapping[str, Any]) -> tuple[str, str] | None:
    """(column, message) of the first rule the measured values break together, or None.

    ``values``: the :data:`MEASURED_COLUMNS` of one row, validated (None where empty).
    """
    if values["peak_memory_gib"] is not None and values["memory_kind"] is None:
        return (
            "memory_kind",
            "required with peak_memory_gib: allocated, reserved, nvidia-smi or unknown (what the number measures)",
        )
    if values["oom"] and (values["peak_memory_gib"] or values["micro_step_time_s"] or values["step_time_s"]):
        return "oom", "an OOM row has no peak_memory_gib or times (leave them empty)"
    return None


_MEASURED_SCHEMA = create_model(  # type: ignore[call-overload]
    "CsvMeasured",
    __config__=ConfigDict(extra="forbid", allow_inf_nan=False),
    **{name: (CsvRow.model_fields[name].annotation, CsvRow.model_fields[name]) for name in MEASURED_COLUMNS},
)
"""The :data:`MEASURED_COLUMNS` of :class:`CsvRow` on their own (its fields: types, bounds, defaults), validated in one
call for a row whose setting was already validated."""


def _measured_values(cells: Mapping[str, str]) -> dict[str, Any] | None:
    """The row's :data:`MEASURED_COLUMNS`, validated (None where empty); None where the whole row must be validated.

    None when one cell is invalid or the values break a rule together: the caller then validates the whole row, whose
    error names the column.
    """
    try:
        values = _MEASURED_SCHEMA.model_validate({k: v for k, v in cells.items() if k in MEASURED_COLUMNS}).__dict__
    except ValidationError:
        return None
    return None if _measured_rule(values) is not None else dict(values)


@dataclass
class _Replicates:
    """The rows of one file read so far, by their setting cells (rows of one setting are replicates).

    The first row of a setting is validated whole (:func:`_csv_run`); a later row with the same setting cells is that
    row's measurement with its own measured values (:func:`_measured_values`), sharing the validated setting, workload
    and architecture: a file of 100,000 rows of a few settings validates a few settings.
    """

    path: Path
    resolve: _Resolver
    stem: str = ""
    first: dict[tuple[tuple[str, str], ...], CsvRun] = field(default_factory=dict)

    def run(self, row: int, line: int, cells: Mapping[str, str]) -> CsvRun:
        """The row's :class:`CsvRun` (errors as :func:`_csv_run`)."""
        key = tuple((k, v) for k, v in cells.items() if k not in MEASURED_COLUMNS)
        known = self.first.get(key)
        values = None if known is None else _measured_values(cells)
        if known is None or values is None:
            run = _csv_run(self.path, row, line, cells, self.resolve)
            self.first.setdefault(key, run)
            return run
        values["id"] = values["id"] or _row_id(self.path, row, self.stem)
        values["memory_kind"] = values["memory_kind"] or "unknown"
        measurement = known.measurement.model_copy(update={**values, "source": f"{self.path} row {row}"})
        return CsvRun(measurement, known.model)


def _check_header(file: Path, header: list[str]) -> None:
    if not header:
        raise ConfigError(f"{file}: empty CSV (expected a header row: {', '.join(CSV_COLUMNS)})")
    for name in header:
        if name not in CSV_COLUMNS:
            close = difflib.get_close_matches(name, CSV_COLUMNS, n=1)
            hint = f"did you mean '{close[0]}'? " if close else ""
            raise ConfigError(f"{file}: unknown column '{name}' ({hint}valid columns: {', '.join(CSV_COLUMNS)})")
    twice = sorted({name for name in header if header.count(name) > 1})
    if twice:
        raise ConfigError(f"{file}: column(s) {', '.join(twice)} given more than once")
    missing = [name for name in CSV_REQUIRED if name not in header]
    if missing:
        raise ConfigError(f"{file}: missing required column(s) {', '.join(missing)}")


def runs_from_csv(path: str | Path) -> list[CsvRun]:
    """Read a CSV of measurements (comment lines, a header row, then one row per run; columns :data:`CSV_COLUMNS`).

    A row whose cells are all empty is skipped (it still counts in the row numbers). A model given as a path
    becomes ``Measurement.model`` = that absolute path; a catalog name becomes the catalog key.

    Raises:
        ConfigError: missing/unreadable file, no header, an unknown (with the closest valid name), repeated or
            missing required column, a row with more cells than the header, or a bad value (one line naming the
            file, row and column).
    """
    file = Path(path)
    replicates = _Replicates(file, _Resolver(file.parent), file.stem)
    with open_regular(file, "CSV file") as handle, read_progress(file, os.fstat(handle.fileno()).st_size) as advance:
        lines = CsvLines(file, handle, advance)
        reader = csv.DictReader(lines, skipinitialspace=True)
        try:
            header = [name.strip() for name in reader.fieldnames or []]
        except csv.Error as error:
            raise ConfigError(f"{file}: header (line {lines.number}): {error}") from None
        _check_header(file, header)
        reader.fieldnames = header
        runs: list[CsvRun] = []
        row = 0
        while True:
            row += 1
            try:
                record = next(reader, None)
            except csv.Error as error:  # e.g. "field larger than field limit (131072)"
                raise ConfigError(f"{file}: row {row} (line {lines.number}): {error}") from None
            if record is None:
                return runs
            if None in record:
                raise _row_error(file, row, lines.number, "?", f"more cells than the {len(header)} columns")
            cells = {k: v.strip() for k, v in record.items() if v is not None and v.strip()}
            if cells:
                runs.append(replicates.run(row, lines.number, cells))


class _Resolver:
    """The GPU and model lookups of one CSV file, each distinct cell resolved once (a file repeats a few of them)."""

    def __init__(self, base_dir: Path) -> None:
        self.base_dir = base_dir
        self.gpu = functools.lru_cache(maxsize=None)(lambda name: resolve_gpu(name)[0])
        self.model = functools.lru_cache(maxsize=None)(lambda name: resolve_model_source(name, base_dir=base_dir))


def measurements_from_csv(path: str | Path) -> list[Measurement]:
    """The measurements of :func:`runs_from_csv` (without the architectures a path model names).

    Raises:
        ConfigError: see :func:`runs_from_csv`.
    """
    return [run.measurement for run in runs_from_csv(path)]
