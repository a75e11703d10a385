"""CSV files of measurements (one row per run; format in docs/calibration.md) read as measurements."""

from __future__ import annotations

import csv
import difflib
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError

from autotune.errors import AutotuneError, ConfigError
from autotune.profiles.catalog import resolve_gpu, resolve_model_profile
from autotune.schemas._base import StrictModel
from autotune.schemas.calibration import MeasuredMemoryGiB, MeasuredStepS, Measurement, MemoryKind
from autotune.schemas.setting import (
    DEFAULT_LORA_RANK,
    Method,
    Optimizer,
    Precision,
    Sharding,
    TrainingSetting,
    Workload,
    default_precision,
    default_sharding,
)
from autotune.validation import format_validation_error


class CsvRow(StrictModel):
    """One CSV row (one run); columns are these field names. Empty cells take the default."""

    model: str = Field(description="Model catalog key or alias.")
    gpu: str = Field(description="GPU catalog key or alias.")
    num_gpus: int = Field(default=1, ge=1, le=64, description="GPUs (one node).")
    method: Method
    seq_len: int = Field(ge=8, le=1_048_576)
    micro_batch_size: int = Field(default=1, ge=1)
    grad_accum: int = Field(default=1, ge=1)
    grad_ckpt: bool = True
    sharding: Sharding | None = Field(default=None, description="Default: none on one GPU, ddp on several.")
    optimizer: Optimizer = "adamw"
    precision: Precision | None = Field(default=None, description="Default: bf16 if the GPU has it, else fp16-mixed.")
    lora_rank: int = Field(default=DEFAULT_LORA_RANK, ge=1)
    # the measured figures' ranges are Measurement's (schemas/calibration.py), for every calibration input
    peak_memory_gib: MeasuredMemoryGiB | None = None
    memory_kind: MemoryKind | None = Field(default=None, description="Required with peak_memory_gib.")
    micro_step_time_s: MeasuredStepS | None = None
    step_time_s: MeasuredStepS | None = None
    oom: bool = False


CSV_COLUMNS: tuple[str, ...] = tuple(CsvRow.model_fields)
CSV_REQUIRED: tuple[str, ...] = tuple(name for name, info in CsvRow.model_fields.items() if info.is_required())


def _row_error(path: Path, row: int, line: int, column: str, message: str) -> ConfigError:
    return ConfigError(f"{path}: row {row} (line {line}), column {column}: {message}")


def _csv_measurement(path: Path, row: int, line: int, cells: dict[str, str]) -> Measurement:
    """Validate one row's non-empty cells and build its measurement (errors name file, row and column)."""
    try:
        parsed = CsvRow.model_validate(cells)
    except ValidationError as error:
        column = str(error.errors()[0]["loc"][0]) if error.errors()[0]["loc"] else "?"
        raise _row_error(path, row, line, column, format_validation_error(error, CsvRow)) from None
    try:
        gpu, _ = resolve_gpu(parsed.gpu)
    except AutotuneError as error:
        raise _row_error(path, row, line, "gpu", str(error)) from None
    try:
        model = resolve_model_profile(parsed.model).key
    except AutotuneError as error:
        raise _row_error(path, row, line, "model", str(error)) from None
    if parsed.peak_memory_gib is not None and parsed.memory_kind is None:
        raise _row_error(
            path,
            row,
            line,
            "memory_kind",
            "required with peak_memory_gib: allocated, reserved, nvidia-smi or unknown (what the number measures)",
        )
    if parsed.oom and (parsed.peak_memory_gib or parsed.micro_step_time_s or parsed.step_time_s):
        raise _row_error(path, row, line, "oom", "an OOM row has no peak_memory_gib or times (leave them empty)")
    try:
        setting = TrainingSetting(
            method=parsed.method,
            micro_batch_size=parsed.micro_batch_size,
            grad_accum=parsed.grad_accum,
            grad_ckpt=parsed.grad_ckpt,
            sharding=parsed.sharding or default_sharding(parsed.num_gpus),
            optimizer=parsed.optimizer,
            precision=parsed.precision or default_precision(gpu.supports_bf16),
            lora_rank=parsed.lora_rank,
        )
    except ValidationError as error:
        raise _row_error(path, row, line, "method/precision", format_validation_error(error)) from None
    global_batch = parsed.micro_batch_size * parsed.grad_accum * parsed.num_gpus
    return Measurement(
        id=f"{path.stem}-row{row}",
        source=f"{path} row {row}",
        model=model,
        gpu=gpu.key,
        num_gpus_per_node=parsed.num_gpus,
        setting=setting,
        workload=Workload(seq_len=parsed.seq_len, global_batch_size=global_batch),
        oom=parsed.oom,
        peak_memory_gib=parsed.peak_memory_gib,
        memory_kind=parsed.memory_kind or "unknown",
        micro_step_time_s=parsed.micro_step_time_s,
        step_time_s=parsed.step_time_s,
    )


def measurements_from_csv(path: str | Path) -> list[Measurement]:
    """Read a CSV of measurements (header row, then one row per run; see :class:`CsvRow`).

    Raises:
        ConfigError: missing/unreadable file, no header, an unknown or missing required column, a row with
            more cells than the header, or a bad value (one line naming the file, row and column).
    """
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise ConfigError(f"{file}: file not found") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"{file}: cannot read it: {error}") from None
    lines = text.splitlines()
    skipped = next((index for index, line in enumerate(lines) if line.strip()), len(lines))  # blank lines above
    reader = csv.DictReader(lines[skipped:], skipinitialspace=True)
    header = [name.strip() for name in reader.fieldnames or []]
    if not header:
        raise ConfigError(f"{file}: empty CSV (expected a header row: {', '.join(CSV_COLUMNS)})")
    for name in header:
        if name not in CSV_COLUMNS:
            close = difflib.get_close_matches(name, CSV_COLUMNS, n=1)
            hint = f"did you mean '{close[0]}'? " if close else ""
            raise ConfigError(f"{file}: unknown column '{name}' ({hint}valid columns: {', '.join(CSV_COLUMNS)})")
    missing = [name for name in CSV_REQUIRED if name not in header]
    if missing:
        raise ConfigError(f"{file}: missing required column(s) {', '.join(missing)}")
    reader.fieldnames = header
    measurements = []
    for row, record in enumerate(reader, start=1):
        if None in record:
            raise _row_error(file, row, skipped + reader.line_num, "?", f"more cells than the {len(header)} columns")
        cells: dict[str, Any] = {k: v.strip() for k, v in record.items() if v is not None and v.strip()}
        if cells:
            measurements.append(_csv_measurement(file, row, skipped + reader.line_num, cells))
    return measurements
