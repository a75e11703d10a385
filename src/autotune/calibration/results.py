"""Predictions next to measurements, and the errors that validation, the fit's losses and the error bands read.

:func:`evaluate` predicts every case and pairs each prediction with the measured quantity it is compared on
(``cases``'s rule); :class:`CaseResult` gives the errors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from autotune.calibration.cases import (
    Case,
    TimeKind,
    comparable_memory_gib,
    comparable_time,
    predicted_time_of_kind,
)
from autotune.costmodel.estimate import dynamic_memory_gib, estimate_setting
from autotune.schemas.calibration import CostCoefficients
from autotune.schemas.estimate import Estimate
from autotune.units import GIB

MIN_MODELLED_SHARE = 0.1
"""Smallest share of the predicted peak the modelled part (activations + logits) must have for a row's memory
residual to inform the error bands (:attr:`CaseResult.informs_memory_band`)."""

MODELLED_PART_FLOOR_GIB = 0.25
"""Floor of the modelled part, GiB, when a memory error is expressed relative to it (a row whose modelled part is
nearly zero would otherwise give an unbounded relative error)."""


@dataclass(frozen=True)
class CaseResult:
    """Prediction next to measurement for one row.

    ``measured_memory_gib`` / ``predicted_memory_gib`` are of the same kind (``cases.comparable_memory_gib``);
    ``measured_time_s`` / ``predicted_time_s`` are micro-step, step or whole-run times (``time_kind`` says which).
    """

    case: Case
    estimate: Estimate
    measured_memory_gib: float | None
    predicted_memory_gib: float | None
    measured_time_s: float | None
    predicted_time_s: float | None
    time_kind: TimeKind | None

    @property
    def id(self) -> str:
        """The measurement id."""
        return self.case.measurement.id

    @property
    def memory_error(self) -> float | None:
        """Relative memory error (predicted / measured − 1), or None."""
        if self.measured_memory_gib is None or self.predicted_memory_gib is None:
            return None
        return self.predicted_memory_gib / self.measured_memory_gib - 1

    @property
    def modelled_memory_gib(self) -> float:
        """The modelled (activations + logits) part of the predicted peak, GiB."""
        return dynamic_memory_gib({k: v * GIB for k, v in self.estimate.memory_breakdown_gib.items()})

    @property
    def informs_memory_band(self) -> bool:
        """Whether this row's memory residual says something about the modelled part.

        True when its kind is known and the modelled part is at least ``MIN_MODELLED_SHARE`` of the predicted peak.
        (A peak made only of
        counted states — e.g. full fine-tuning at the optimizer step — differs from a reserved measurement by
        the allocator's caching, which it releases under memory pressure, not by a modelling error.)
        """
        return (
            self.measured_memory_gib is not None
            and self.case.measurement.memory_kind != "unknown"
            and self.modelled_memory_gib >= MIN_MODELLED_SHARE * self.estimate.peak_memory_gib
        )

    @property
    def memory_error_of_modelled_part(self) -> float | None:
        """|predicted − measured| over the modelled part of the prediction, or None."""
        if self.measured_memory_gib is None or self.predicted_memory_gib is None:
            return None
        return abs(self.predicted_memory_gib - self.measured_memory_gib) / max(
            self.modelled_memory_gib, MODELLED_PART_FLOOR_GIB
        )

    @property
    def memory_underprediction_of_modelled_part(self) -> float | None:
        """max(0, measured − predicted) over the modelled part of the prediction, or None."""
        if self.measured_memory_gib is None or self.predicted_memory_gib is None:
            return None
        under = max(0.0, self.measured_memory_gib - self.predicted_memory_gib)
        return under / max(self.modelled_memory_gib, MODELLED_PART_FLOOR_GIB)

    @property
    def time_error(self) -> float | None:
        """Relative time error (predicted / measured − 1), or None."""
        if self.measured_time_s is None or self.predicted_time_s is None:
            return None
        return self.predicted_time_s / self.measured_time_s - 1

    @property
    def oom_measured(self) -> bool:
        """The source reports that this row ran out of memory."""
        return self.case.measurement.oom

    @property
    def oom_correct(self) -> bool:
        """The fit verdict agrees with the measurement (OOM ↔ not fits)."""
        return self.estimate.fits != self.oom_measured


def evaluate(cases: Sequence[Case], coefficients: CostCoefficients) -> list[CaseResult]:
    """Predict every case with ``coefficients`` and pair predictions with measurements.

    Cases that share their model, cluster, setting and workload objects (the rows of one setting a CSV repeats,
    ``profiles.measurement_csv``) share one estimate: it depends on nothing else.
    """
    results = []
    estimates: dict[tuple[int, int, int, int], Estimate] = {}
    for case in cases:
        measurement = case.measurement
        key = (id(case.model), id(case.cluster), id(measurement.setting), id(measurement.workload))
        estimate = estimates.get(key)
        if estimate is None:
            estimate = estimates[key] = estimate_setting(
                case.model, case.cluster, measurement.workload, measurement.setting, coefficients, evidence=False
            )
        measured_memory = predicted_memory = None
        if measurement.peak_memory_gib is not None:
            measured_memory = measurement.peak_memory_gib
            predicted_memory = comparable_memory_gib(measurement, estimate)
        measured_time = predicted_time = None
        time_kind: TimeKind | None = None
        compared = comparable_time(measurement)
        if compared is not None:
            time_kind, measured_time = compared
            predicted_time = predicted_time_of_kind(time_kind, estimate)
        results.append(
            CaseResult(case, estimate, measured_memory, predicted_memory, measured_time, predicted_time, time_kind)
        )
    return results
