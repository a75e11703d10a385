"""Compare predictions with measurements and fit the free coefficients (``autotune validate`` / ``calibrate``).

What is compared, per measurement row:
  * memory: the measured peak against the prediction of the same kind — allocated for ``allocated``;
    reserved, capped at the GPU's memory minus the CUDA context, for ``reserved`` and ``unknown`` (a caching
    allocator never reserves more than the card has; it frees cached blocks first); reserved + context,
    capped at the GPU's memory, for ``nvidia-smi``;
  * out of memory: an OOM row must be predicted as not fitting, every row that ran as fitting;
  * time: one micro-step when the source gives it, else the whole run's wall time (needs its dataset size);
    rows with ``unknown_tokens`` are left out of time comparisons.
Memory rows whose ``memory_kind`` is ``unknown`` are validated but not fitted (a number of unknown meaning
cannot calibrate what it measures), and out-of-memory verdicts are validated, not fitted. The fit works in
log space (so 2× over and 2× under weigh the same) with Nelder–Mead: memory coefficients minimize the mean
absolute log error (robust to a few rows of a stack we model poorly), time coefficients the mean squared
log error (``time_fit``: a few efficiencies per architecture generation, with datasheet priors); the two sets
are fitted separately (they do not interact). Error bands per family are the 90th
percentile of the rows' errors in that family.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from autotune.costmodel._optimize import nelder_mead
from autotune.costmodel.estimate import dynamic_memory_gib, estimate_setting, memory_family
from autotune.costmodel.priors import CUDA_CONTEXT_BYTES
from autotune.costmodel.time_fit import fit_time_coefficients
from autotune.profiles.catalog import resolve_gpu, resolve_model_profile
from autotune.profiles.measurements import measurement_models
from autotune.schemas.calibration import CostCoefficients, Measurement
from autotune.schemas.estimate import Estimate
from autotune.schemas.hardware import ClusterSpec
from autotune.schemas.model import ModelSpec
from autotune.units import GIB

CONTEXT_GIB = CUDA_CONTEXT_BYTES / GIB
BAND_QUANTILE = 0.9
MIN_MODELLED_SHARE = 0.1


@dataclass(frozen=True)
class Case:
    """A measurement with its resolved model and cluster, ready to be predicted."""

    measurement: Measurement
    model: ModelSpec
    cluster: ClusterSpec


@dataclass(frozen=True)
class CaseResult:
    """Prediction next to measurement for one row.

    ``measured_memory_gib`` / ``predicted_memory_gib`` are of the same kind (see module docstring);
    ``measured_time_s`` / ``predicted_time_s`` are micro-step or whole-run times (``time_kind`` says which).
    """

    case: Case
    estimate: Estimate
    measured_memory_gib: float | None
    predicted_memory_gib: float | None
    measured_time_s: float | None
    predicted_time_s: float | None
    time_kind: str | None

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

        True when its kind is known and the modelled part is at least ``MIN_MODELLED_SHARE`` of the predicted peak. (A
        peak made only of counted states — e.g. full fine-tuning at the optimizer step — differs from a reserved
        measurement by the allocator's caching, which it releases under memory pressure, not by a modelling error.)
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
        return abs(self.predicted_memory_gib - self.measured_memory_gib) / max(self.modelled_memory_gib, 0.25)

    @property
    def memory_underprediction_of_modelled_part(self) -> float | None:
        """max(0, measured − predicted) over the modelled part of the prediction, or None."""
        if self.measured_memory_gib is None or self.predicted_memory_gib is None:
            return None
        under = max(0.0, self.measured_memory_gib - self.predicted_memory_gib)
        return under / max(self.modelled_memory_gib, 0.25)

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


def prepare_cases(measurements: Iterable[Measurement]) -> list[Case]:
    """Resolve each measurement's model and GPU from the catalog.

    Raises:
        UnknownNameError: a row names a model or GPU that is not in the catalog.
    """
    cases = []
    extra_models = measurement_models()
    for measurement in measurements:
        gpu, _ = resolve_gpu(measurement.gpu)
        network = {"inter_node_gb_per_s": measurement.inter_node_gb_per_s} if measurement.inter_node_gb_per_s else {}
        cluster = ClusterSpec(
            gpu=gpu, num_gpus_per_node=measurement.num_gpus_per_node, num_nodes=measurement.num_nodes, **network
        )
        model = extra_models.get(measurement.model) or resolve_model_profile(measurement.model)
        cases.append(Case(measurement, model, cluster))
    return cases


def _predicted_memory(measurement: Measurement, estimate: Estimate) -> float:
    capacity = estimate.gpu_memory_gib
    if measurement.memory_kind == "allocated":
        return estimate.peak_memory_gib
    if measurement.memory_kind == "nvidia-smi":
        return min(estimate.peak_reserved_gib + CONTEXT_GIB, capacity)
    return min(estimate.peak_reserved_gib, capacity - CONTEXT_GIB)


def evaluate(cases: Sequence[Case], coefficients: CostCoefficients) -> list[CaseResult]:
    """Predict every case with ``coefficients`` and pair predictions with measurements."""
    results = []
    for case in cases:
        measurement = case.measurement
        estimate = estimate_setting(case.model, case.cluster, measurement.workload, measurement.setting, coefficients)
        measured_memory = predicted_memory = None
        if measurement.peak_memory_gib is not None:
            measured_memory = measurement.peak_memory_gib
            predicted_memory = _predicted_memory(measurement, estimate)
        measured_time = predicted_time = None
        time_kind = None
        if not measurement.unknown_tokens:
            if measurement.micro_step_time_s is not None:
                measured_time, predicted_time = measurement.micro_step_time_s, estimate.micro_step_time_s
                time_kind = "micro-step"
            elif measurement.step_time_s is not None:
                measured_time, predicted_time = measurement.step_time_s, estimate.step_time_s
                time_kind = "step"
            elif measurement.run_time_s is not None and estimate.total_time_s is not None:
                measured_time, predicted_time = measurement.run_time_s, estimate.total_time_s
                time_kind = "run"
        results.append(
            CaseResult(case, estimate, measured_memory, predicted_memory, measured_time, predicted_time, time_kind)
        )
    return results


def _squared_log(ratio_values: Iterable[tuple[float, float]]) -> list[float]:
    return [math.log(predicted / measured) ** 2 for predicted, measured in ratio_values]


def memory_loss(results: Sequence[CaseResult]) -> float:
    """Mean absolute log error of memory; out-of-memory rows carry no figure and are not fitted.

    Robust: a few rows of a stack we model poorly do not drag the coefficients away from the rows we model well.
    """
    terms = [
        abs(math.log(r.predicted_memory_gib / r.measured_memory_gib))
        for r in results
        if r.predicted_memory_gib is not None and r.measured_memory_gib is not None
    ]
    return sum(terms) / max(1, len(terms))


def time_loss(results: Sequence[CaseResult]) -> float:
    """Mean squared log error of times."""
    terms = _squared_log(
        (r.predicted_time_s, r.measured_time_s)
        for r in results
        if r.predicted_time_s is not None and r.measured_time_s is not None
    )
    return sum(terms) / max(1, len(terms))


MEMORY_PARAMETERS = ("allocator_overhead_fraction",)
"""The only fitted memory term: what a CPU trace cannot see (fragmentation of the caching allocator).
Activations and logits are derived and checked against the trace (``benchmarks/trace_agreement.py``)."""


def _with(coefficients: CostCoefficients, **updates: object) -> CostCoefficients:
    return coefficients.model_copy(update=updates)


def fit_parameters(
    cases: Sequence[Case],
    start: CostCoefficients,
    origin: Sequence[float],
    update: Callable[[Sequence[float]], dict[str, object]],
    loss: Callable[[Sequence[CaseResult]], float],
    *,
    step: float,
    max_evaluations: int,
) -> CostCoefficients:
    """``start`` with ``update(point)`` applied, for the ``point`` that minimizes ``loss(evaluate(cases, ...))``.

    Nelder–Mead (:func:`~autotune.costmodel._optimize.nelder_mead`) from ``origin`` with simplex ``step``, within
    ``max_evaluations`` loss evaluations. ``update`` maps a point (log-space parameters, so steps are relative) to the
    coefficient fields it sets; the losses are :func:`memory_loss` / :func:`time_loss`.
    """
    best, _ = nelder_mead(
        lambda point: loss(evaluate(cases, _with(start, **update(point)))),
        list(origin),
        step=step,
        max_evaluations=max_evaluations,
    )
    return _with(start, **update(best))


def fit_coefficients(
    cases: Sequence[Case],
    start: CostCoefficients | None = None,
    name: str = "fit",
    source: str = "",
    reference_stack: str | None = None,
) -> CostCoefficients:
    """Fit memory and time coefficients to the cases; returns a new calibration with error bands.

    Time coefficients: ``time_fit.fit_time_coefficients`` (efficiencies per architecture generation with time
    rows, MAP around their datasheet priors, one slowness factor per source table's stack, measured from
    ``reference_stack`` or the fastest). Coefficients without data in ``cases`` keep their starting values.
    """
    start = start or CostCoefficients()
    memory_cases = [
        c for c in cases if c.measurement.peak_memory_gib is not None and c.measurement.memory_kind != "unknown"
    ]

    # The allocator's fragmentation is only identifiable from rows that measured reserved memory.
    reserved_cases = [c for c in memory_cases if c.measurement.memory_kind in ("reserved", "nvidia-smi")]

    def memory_update(point: Sequence[float]) -> dict[str, object]:
        return {"allocator_overhead_fraction": max(0.0, math.exp(point[0]) - 1)}

    fitted = start
    if reserved_cases:
        origin = [math.log(1 + start.allocator_overhead_fraction)]
        fitted = fit_parameters(
            reserved_cases, start, origin, memory_update, memory_loss, step=0.2, max_evaluations=200
        )

    fitted = fit_time_coefficients(cases, fitted, reference_stack)

    memory_band, headroom_band, time_band = error_bands(evaluate(cases, fitted))
    today = _dt.date.today().isoformat()
    return _with(
        fitted,
        name=name,
        source=source or f"fitted on {len(cases)} measurements on {today}",
        memory_error_band=memory_band,
        memory_headroom_band=headroom_band,
        time_error_band=time_band,
    )


def _quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    index = min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))
    return ordered[index]


def error_bands(
    results: Sequence[CaseResult],
) -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
    """90th-percentile errors per family (method, method-sharded, method-offload) and 'default'.

    Memory bands are relative to the modelled part of the prediction (see ``dynamic_memory_gib``) and use
    only rows that inform it (``CaseResult.informs_memory_band``); time bands are relative to the
    predicted time.
    """
    memory: dict[str, list[float]] = {}
    headroom: dict[str, list[float]] = {}
    time: dict[str, list[float]] = {}
    for r in results:
        family = memory_family(r.case.measurement.setting)
        modelled_error = r.memory_error_of_modelled_part
        under = r.memory_underprediction_of_modelled_part
        if modelled_error is not None and under is not None and r.informs_memory_band:
            for key in (family, "default"):
                memory.setdefault(key, []).append(modelled_error)
                headroom.setdefault(key, []).append(under)
        if r.time_error is not None:
            time.setdefault(family, []).append(abs(r.time_error))
            time.setdefault("default", []).append(abs(r.time_error))

    def bands(values: dict[str, list[float]], fallback: float) -> dict[str, float]:
        result = {k: round(_quantile(v, BAND_QUANTILE), 4) for k, v in values.items() if len(v) >= 3}
        result.setdefault("default", fallback)
        return result

    return bands(memory, 0.15), bands(headroom, 0.15), bands(time, 0.35)
