"""autotune.calibration.cases: the one rule for what a measured row is compared on, and its consumers."""

from __future__ import annotations

import pytest

from autotune.calibration.cases import (
    CONTEXT_GIB,
    comparable_memory_gib,
    comparable_time,
    memory_of_known_kind,
    prepare_cases,
)
from autotune.calibration.results import evaluate
from autotune.calibration.time_fit import BOUNDS, schema_bounds, time_rows
from autotune.calibration.validation import largest_errors, summarize
from autotune.costmodel.calibration import default_coefficients
from autotune.schemas.calibration import CostCoefficients, Measurement
from autotune.schemas.setting import TrainingSetting
from autotune.schemas.workload import Workload


def measurement(**fields: object) -> Measurement:
    """A llama3-8b LoRA row on one RTX 4090 with the given measured figures."""
    base: dict[str, object] = {
        "id": "r",
        "source": "999_synthetic.txt, table 1",
        "model": "llama3-8b",
        "gpu": "rtx-4090",
        "setting": TrainingSetting(method="lora", micro_batch_size=1, grad_accum=1),
        "workload": Workload(seq_len=512, global_batch_size=1),
    }
    return Measurement(**{**base, **fields})


def test_micro_step_is_preferred_then_step_then_run() -> None:
    stated = Workload(seq_len=512, global_batch_size=1, num_samples=100)
    assert comparable_time(measurement(micro_step_time_s=1.0, step_time_s=2.0, run_time_s=3.0)) == ("micro-step", 1.0)
    assert comparable_time(measurement(step_time_s=2.0, run_time_s=3.0, workload=stated)) == ("step", 2.0)
    assert comparable_time(measurement(run_time_s=3.0, workload=stated)) == ("run", 3.0)


def test_a_run_without_dataset_size_or_with_unknown_tokens_is_not_comparable() -> None:
    assert comparable_time(measurement(run_time_s=3.0)) is None
    assert comparable_time(measurement(micro_step_time_s=1.0, unknown_tokens=True)) is None


def test_validation_and_the_time_fit_compare_the_same_rows() -> None:
    stated = Workload(seq_len=512, global_batch_size=1, num_samples=100)
    rows = [
        measurement(id="micro", micro_step_time_s=1.0),
        measurement(id="run", run_time_s=30.0, workload=stated),
        measurement(id="unstated", run_time_s=30.0),
        measurement(id="unknown", micro_step_time_s=1.0, unknown_tokens=True),
    ]
    cases = prepare_cases(rows)
    evaluated = {r.id: r.time_kind for r in evaluate(cases, CostCoefficients()) if r.measured_time_s is not None}
    fitted = {r.case.measurement.id: r.kind for r in time_rows(cases)}
    assert evaluated == fitted == {"micro": "micro-step", "run": "run"}


def test_memory_is_compared_on_the_measured_kind() -> None:
    row = measurement(peak_memory_gib=10.0, memory_kind="allocated")
    estimate = evaluate(prepare_cases([row]), CostCoefficients())[0].estimate
    assert comparable_memory_gib(row, estimate) == estimate.peak_memory_gib
    smi = row.model_copy(update={"memory_kind": "nvidia-smi"})
    expected = min(estimate.peak_reserved_gib + CONTEXT_GIB, estimate.gpu_memory_gib)
    assert comparable_memory_gib(smi, estimate) == pytest.approx(expected)
    assert memory_of_known_kind(row)
    assert not memory_of_known_kind(row.model_copy(update={"memory_kind": "unknown"}))


def test_time_fit_bounds_are_the_schema_bounds() -> None:
    field = CostCoefficients.model_fields["bandwidth_efficiency"]
    lower = next(m.ge for m in field.metadata if hasattr(m, "ge"))
    assert BOUNDS["bandwidth_efficiency"] == schema_bounds("bandwidth_efficiency")
    assert BOUNDS["bandwidth_efficiency"][0] == lower
    with pytest.raises(ValueError, match="no ge / le bounds"):
        schema_bounds("name")


def test_largest_errors_leave_out_memory_rows_of_unknown_kind() -> None:
    from autotune.profiles.measurements import all_measurements

    summary = summarize(evaluate(prepare_cases(all_measurements()), default_coefficients()))
    assert any(r.memory_kind == "unknown" and r.memory_error is not None for r in summary.rows)
    every = largest_errors(summary.rows, len(summary.rows), "memory")
    comparable = [r for r in summary.rows if r.memory_kind != "unknown" and r.memory_error is not None]
    assert {r.id for r in every} == {r.id for r in comparable}
    assert summary.worst(3, "memory") == every[:3]
    times = largest_errors(summary.rows, len(summary.rows), "time")
    assert len(times) == sum(r.time_error is not None for r in summary.rows)  # time rows are not filtered
    errors = [abs(r.memory_error or 0.0) for r in every]
    assert errors == sorted(errors, reverse=True)
