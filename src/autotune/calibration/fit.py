"""Fit the free coefficients to measured rows (``autotune calibrate``, ``benchmarks/calibrate_seeds.py``).

What is compared per row is ``cases``'s rule; predictions are paired with measurements by ``results.evaluate``.
Memory rows whose ``memory_kind`` is ``unknown`` are validated but not fitted (a number of unknown meaning
cannot calibrate what it measures), and out-of-memory verdicts are validated, not fitted. The fit works in
log space (so 2× over and 2× under weigh the same) with Nelder–Mead: memory coefficients minimize the mean
absolute log error (robust to a few rows of a stack we model poorly), time coefficients the mean squared
log error (``time_fit``: a few efficiencies per architecture generation, with datasheet priors); the two sets
are fitted separately (they do not interact). Error bands per family are the ``BAND_QUANTILE`` quantile of the
rows' errors in that family.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Callable, Sequence

from autotune.calibration.cases import RESERVED_KINDS, Case, memory_of_known_kind
from autotune.calibration.nelder_mead import nelder_mead
from autotune.calibration.results import CaseResult, evaluate
from autotune.calibration.time_fit import fit_time_coefficients
from autotune.costmodel.estimate import memory_family
from autotune.schemas.calibration import CostCoefficients

BAND_QUANTILE = 0.9
"""The error bands' quantile of the rows' errors per family (the 90th percentile)."""

BAND_DECIMALS = 4
"""Decimals a band is rounded to (the calibration file stays readable; 1e-4 is far below any band's meaning)."""

BAND_MIN_ROWS = 3
"""Fewest rows a family needs to get its own band (fewer: it falls back to its method's, then 'default')."""

MEMORY_BAND_FALLBACK = 0.15
"""The 'default' memory band (relative to the modelled part) when no family has ``BAND_MIN_ROWS`` memory rows."""

HEADROOM_BAND_FALLBACK = 0.15
"""The 'default' headroom band (under-prediction relative to the modelled part) without enough memory rows."""

TIME_BAND_FALLBACK = 0.35
"""The 'default' relative time band when no family has ``BAND_MIN_ROWS`` timed rows."""

MEMORY_FIT_STEP = 0.2
"""Nelder–Mead's first step for the allocator fit, in log units (a factor 1.22 on 1 + the overhead fraction)."""

MEMORY_FIT_MAX_EVALUATIONS = 200
"""Nelder–Mead budget of the one-dimensional allocator fit."""


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

    Nelder–Mead (:func:`~autotune.calibration.nelder_mead.nelder_mead`) from ``origin`` with simplex ``step``, within
    ``max_evaluations`` loss evaluations. ``update`` maps a point (log-space parameters, so steps are relative) to the
    coefficient fields it sets; the loss is e.g. :func:`memory_loss`.
    """
    best, _ = nelder_mead(
        lambda point: loss(evaluate(cases, _with(start, **update(point)))),
        list(origin),
        step=step,
        max_evaluations=max_evaluations,
    )
    return _with(start, **update(best))


def reserved_memory_cases(cases: Sequence[Case]) -> list[Case]:
    """The rows that measured reserved (or nvidia-smi) memory: the only ones that identify the allocator's overhead."""
    return [c for c in cases if memory_of_known_kind(c.measurement) and c.measurement.memory_kind in RESERVED_KINDS]


def fit_allocator(cases: Sequence[Case], start: CostCoefficients) -> CostCoefficients:
    """``start`` with ``allocator_overhead_fraction`` fitted to the reserved-memory rows (:func:`memory_loss`).

    Unchanged without such rows (peak allocated memory does not depend on it).
    """
    reserved_cases = reserved_memory_cases(cases)
    if not reserved_cases:
        return start

    def memory_update(point: Sequence[float]) -> dict[str, object]:
        return {"allocator_overhead_fraction": max(0.0, math.exp(point[0]) - 1)}

    return fit_parameters(
        reserved_cases,
        start,
        [math.log(1 + start.allocator_overhead_fraction)],
        memory_update,
        memory_loss,
        step=MEMORY_FIT_STEP,
        max_evaluations=MEMORY_FIT_MAX_EVALUATIONS,
    )


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
    fitted = fit_time_coefficients(cases, fit_allocator(cases, start), reference_stack)

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


def band_quantile(values: Sequence[float]) -> float:
    """The ``BAND_QUANTILE`` quantile of ``values`` (the nearest-rank one; 0 for none): what a band is read from."""
    return _quantile(values, BAND_QUANTILE)


def error_bands(
    results: Sequence[CaseResult],
) -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
    """``BAND_QUANTILE`` errors per family (method, method-sharded, method-offload) and 'default'.

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
        result = {
            k: round(_quantile(v, BAND_QUANTILE), BAND_DECIMALS) for k, v in values.items() if len(v) >= BAND_MIN_ROWS
        }
        result.setdefault("default", fallback)
        return result

    return bands(memory, MEMORY_BAND_FALLBACK), bands(headroom, HEADROOM_BAND_FALLBACK), bands(time, TIME_BAND_FALLBACK)
