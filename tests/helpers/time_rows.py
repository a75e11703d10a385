"""Timed rows a given factor off the start's prediction, for the few-rows refit's tests (stack_fit, outliers)."""

from __future__ import annotations

from typing import Any

from autotune.calibration.cases import Case, prepare_cases
from autotune.calibration.time_fit import TimeRow, predicted_time_s, time_rows
from autotune.costmodel.calibration import default_coefficients
from autotune.schemas.calibration import Measurement
from autotune.schemas.setting import TrainingSetting
from autotune.schemas.workload import Workload

START = default_coefficients()
"""The shipped calibration: the start every row's factor is relative to."""


def row(scale: float, seq_len: int = 2048, gpu: str = "rtx-4090", **setting: Any) -> TimeRow:
    """A timed row measuring ``scale`` × the start's micro-step prediction for Llama 3.2 1B."""
    options: dict[str, Any] = {"method": "lora", "micro_batch_size": 1, "grad_ckpt": True, **setting}
    measurement = Measurement(
        id=f"r{scale}-{seq_len}-{sorted(setting.items())}",
        source="test",
        model="llama3.2-1b",
        gpu=gpu,
        setting=TrainingSetting(**options),
        workload=Workload(seq_len=seq_len, global_batch_size=8),
        micro_step_time_s=1.0,
    )
    (case,) = prepare_cases([measurement])
    predicted = predicted_time_s(TimeRow(case, "micro-step", 1.0), START)
    timed = Case(case.measurement.model_copy(update={"micro_step_time_s": predicted * scale}), case.model, case.cluster)
    (result,) = time_rows([timed])
    return result


def from_source(timed: TimeRow, source: str) -> TimeRow:
    """``timed`` as a row of the measurement set ``source`` (one stack)."""
    case = timed.case
    measurement = case.measurement.model_copy(update={"source": source, "id": f"{source}-{case.measurement.id}"})
    return TimeRow(Case(measurement, case.model, case.cluster), timed.kind, timed.measured_s)
