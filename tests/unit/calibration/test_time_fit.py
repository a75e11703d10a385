"""The time fit: per-stack slowness factors are measured from the fastest stack, recovered from data, and kept out
of the coefficients that predict; ``bandwidth_efficiency`` stays within what element-wise kernels reach."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from autotune.calibration.cases import Case, prepare_cases
from autotune.calibration.time_fit import BOUNDS, fit_time_coefficients, predicted_time_s, stack_slowness, time_rows
from autotune.profiles.measurements import all_measurements
from autotune.schemas.calibration import (
    BANDWIDTH_EFFICIENCY_MAX,
    BANDWIDTH_EFFICIENCY_MIN,
    CostCoefficients,
    source_table,
)

TRUTH = CostCoefficients(
    matmul_efficiency={"ampere": 0.7, "hopper": 0.6, "default": 0.6},
    attention_efficiency={"ampere": 0.5, "hopper": 0.35, "default": 0.4},
    bandwidth_efficiency=0.7,
)


def _synthetic(cases: list[Case], slowdown: float) -> list[Case]:
    """The cases with their measured time replaced by ``TRUTH``'s prediction × ``slowdown``."""
    out = []
    for row in time_rows(cases):
        field = {"micro-step": "micro_step_time_s", "step": "step_time_s", "run": "run_time_s"}[row.kind]
        measured = predicted_time_s(row, TRUTH) * slowdown
        m = row.case.measurement.model_copy(update={field: measured})  # type: ignore[attr-defined]
        out.append(Case(m, row.case.model, row.case.cluster))  # type: ignore[attr-defined]
    return out


def test_stack_slowness_is_measured_from_the_fastest_stack() -> None:
    assert stack_slowness([]) == []
    assert stack_slowness([0.3, -0.2, 0.5]) == pytest.approx([0.5, 0.0, 0.7])


def _fast_row_error(cases: list[Case], fast_count: int, fitted: CostCoefficients) -> float:
    """Largest |log(predicted / measured)| over the first ``fast_count`` cases, predicted without any factor."""
    return max(abs(math.log(predicted_time_s(r, fitted) / r.measured_s)) for r in time_rows(cases[:fast_count]))


def test_a_slow_stack_gets_its_own_factor_and_leaves_the_efficiencies_to_the_fast_one() -> None:
    measurements = all_measurements()
    fast = [m for m in measurements if m.id.startswith("MF-") and m.gpu == "a100-80gb"][:8]
    slow = [m for m in measurements if m.id.startswith("001-a100-80gb") and m.model == "llama3-8b"]
    assert fast and slow
    cases = _synthetic(prepare_cases(fast), 1.0) + _synthetic(prepare_cases(slow), 2.0)
    fitted = fit_time_coefficients(cases, TRUTH)
    factors = fitted.stack_time_factor
    fast_source, slow_source = source_table(fast[0].source), source_table(slow[0].source)
    assert set(factors) == {fast_source, slow_source}
    assert factors[fast_source] == pytest.approx(1.0)
    assert 1.3 < factors[slow_source] <= 2.0  # the prior shrinks it towards 1 (MAP), the data pulls it to 2
    # The priors sit at the truth, so only the slow rows can pull the coefficients away from it. Told that both
    # tables are one stack, the fit must split the difference and predicts the fast rows worse.
    one_stack = [Case(c.measurement.model_copy(update={"source": fast[0].source}), c.model, c.cluster) for c in cases]
    merged = fit_time_coefficients(one_stack, TRUTH)
    assert merged.stack_time_factor == {fast_source: 1.0}
    assert _fast_row_error(cases, len(fast), fitted) < _fast_row_error(cases, len(fast), merged)


def test_bandwidth_efficiency_is_bounded_in_the_schema_and_the_fit() -> None:
    assert BOUNDS["bandwidth_efficiency"] == (BANDWIDTH_EFFICIENCY_MIN, BANDWIDTH_EFFICIENCY_MAX)
    with pytest.raises(ValidationError):
        CostCoefficients(bandwidth_efficiency=0.24)
    with pytest.raises(ValidationError):
        CostCoefficients(bandwidth_efficiency=0.99)


def test_a_named_reference_stack_is_the_one_the_coefficients_describe() -> None:
    measurements = all_measurements()
    fast = [m for m in measurements if m.id.startswith("MF-") and m.gpu == "a100-80gb"][:8]
    slow = [m for m in measurements if m.id.startswith("001-a100-80gb") and m.model == "llama3-8b"]
    cases = _synthetic(prepare_cases(fast), 1.0) + _synthetic(prepare_cases(slow), 2.0)
    slow_source = source_table(slow[0].source)
    fitted = fit_time_coefficients(cases, TRUTH, reference_stack=slow_source)
    assert fitted.stack_time_factor[slow_source] == pytest.approx(1.0)
    assert fitted.stack_time_factor[source_table(fast[0].source)] < 1.0  # the other stack ran faster
    slow_errors = [abs(math.log(predicted_time_s(r, fitted) / r.measured_s)) for r in time_rows(cases[len(fast) :])]
    fastest_first = fit_time_coefficients(cases, TRUTH)
    fastest_errors = [
        abs(math.log(predicted_time_s(r, fastest_first) / r.measured_s)) for r in time_rows(cases[len(fast) :])
    ]
    assert max(slow_errors) < max(fastest_errors)
