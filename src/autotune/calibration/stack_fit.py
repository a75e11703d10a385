"""The time refit that a few of the user's rows can support (``autotune calibrate``, issue 28).

A user who measures k settings of their own stack tells the model two kinds of thing: how much slower or faster their
stack runs everything (one factor, which every row measures), and — only where the rows differ in how much of their
time a term takes — how far that term's coefficient is off. The refit therefore fits, in this order:

1. ``time_scale``, the stack factor, when the rows favour "another stack" over "the stack the start describes"
   (:func:`stack_evidence`, a Bayes factor): every timed row measures it, but rows that agree with the start within
   their own scatter only add their setting-dependent noise to it, so it then keeps the start's value;
2. a term's coefficient (a GPU's matmul or attention efficiency, the DRAM efficiency, CPU Adam's rate, the ZeRO-3 fetch
   cost, peft's and bitsandbytes' per-call CPU costs) only when the rows *vary* that term: its elasticity
   ∂ log t / ∂ log c, measured on each row at the start, spans at least ``MIN_ELASTICITY_SPREAD`` across the rows.
   A coefficient with the same elasticity on every row is the stack factor under another name (three LoRA rows at one
   sequence length cannot tell the GPU's efficiency from the stack's speed); a coefficient no row exercises has
   elasticity 0 everywhere. At most k − 3 terms are fitted (the widest spreads first): three rows fit the stack factor
   alone (``ROWS_PER_EXTRA_TERM``).

The fit is a maximum a posteriori one (a ridge in log space): the mean squared log error of the rows over
``ROW_LOG_SIGMA`` plus Gaussian priors centred on the starting calibration — :func:`stack_prior_log_sigma` for the
stack factor, ``time_fit.PRIOR_LOG_SIGMA`` (or its per-field value) for the term coefficients. Since the priors cost
nothing at the start, the fit never matches its rows worse than the start does in squared log error (the penalty is
≥ 0); the caller still checks it (``recalibrate.check_not_worse``). Coefficients the rows do not identify keep the
start's values exactly.

**Outliers** are named and left out before this fit (``calibration.outliers``: a leave-one-out test against the rows'
scatter prior).

**Bands** come from held-out errors (``held_out.loo_time_errors``), not in-sample residuals that three rows fit by
construction. Rows measured at one setting are one point of the fit (``replicates``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from autotune.calibration.coverage import gls_mean, local_correction, local_log_variance, row_point
from autotune.calibration.nelder_mead import nelder_mead
from autotune.calibration.replicates import fitted_settings, member_rows, replicate_groups, row_log_ratios
from autotune.calibration.time_fit import (
    BOUNDS,
    PRIOR_LOG_SIGMA,
    PRIOR_LOG_SIGMA_BY_FIELD,
    UNBOUNDED_ABOVE_ONE,
    TimeRow,
    predicted_time_s,
)
from autotune.costmodel.device import efficiency
from autotune.schemas.calibration import TIME_SCALE_MAX, TIME_SCALE_MIN, CostCoefficients
from autotune.schemas.time_correction import LocalTimeCorrection

STACK_LOG_SIGMA = 1.0
"""Prior σ of log ``time_scale`` for a stack other than the one the start describes: stacks measured so far run
1–2.2× the core (the shipped fit's ``stack_time_factor``: seed 001's trainer 2.19, seed 003's 1.28, llm-foundry
1.06), so one σ is a factor e; a single row outweighs it (``ROW_LOG_SIGMA``)."""

SAME_STACK_PROBABILITY = 0.5
"""Prior probability that the user's stack is one the start describes (no preference between the two hypotheses of
:func:`stack_evidence`)."""

ROW_LOG_SIGMA = 0.1
"""Expected log error of one row once the stack factor is known, on a stack the start describes: the core's runs held
out (≤ 7 % tokens/s, ``benchmarks/core_loo.py``) and llm-foundry's rows (sd of the log ratio 0.075–0.080 per card).
Foreign stacks scatter more (seed 001 0.19–0.23, seed 003 0.34), but there the "another stack" component of the
prior dominates anyway. 0.14 (the median scatter over all eight stacks and cards) was tried: one run 1.5× slow then
moved the factor only to 1.41 under the earlier mixture prior, for one draw fewer worse on the benchmark; under the
Bayes-factor choice (``calibration_trials.py --sensitivity``, blind) 1 draw worse of 40 against 2, pooled −69 % both."""

ROW_SIGMA_PRIOR_DOF = 3
"""Degrees of freedom of the prior on the rows' own scatter (a scaled inverse-χ² centred on ``ROW_LOG_SIGMA``; the
conjugate prior of a normal's variance, Gelman et al., *Bayesian Data Analysis* 3rd ed., §3.3): the scatter the stack
factor's standard error uses is (ν₀ σ₀² + (k − 1) s²) / (ν₀ + k − 1), so three rows that disagree by 30 % widen it and
three that agree narrow it, each as much as three prior rows allow. ``benchmarks/calibration_trials.py``, blind starts
(2026-11-27): draws worse 8 → 7 of 40 (6 → 5 by more than a point), pooled held-out MAPE 15.2 → 15.1 %; shipped start:
9 → 8 (3 → 1), 14.0 → 14.2 % (seed 003, whose rows scatter most, moves less: tokens/s 30.9 → 33.6 %, time
26.4 → 24.1 %). ν₀ = 1 gave the same pooled figures (blind 7 draws worse, 4 by more than a point; seed 003 34.9 %
from the shipped start): 3 was kept, the scatter of three rows alone being a noisy estimate. Under the Bayes-factor
choice that replaced the mixture (:func:`stack_evidence`), ``calibration_trials.py --sensitivity`` (blind starts,
the other constants as set): ν₀ = 1, 3, 5 give pooled −69 % each, worse in 2, 2, 3 draws of 40, at most 1, 1, 2 of 5
for one source."""

MIN_ELASTICITY_SPREAD = 0.15
"""A term coefficient is fitted only when ∂ log t / ∂ log c differs by at least this much between two of the rows: a
15 % difference in the share of time the term takes (below it, the coefficient and the stack factor trade off almost
freely and three rows' noise would decide it)."""

ROWS_PER_EXTRA_TERM = 3
"""Rows needed beyond the stack factor for each term coefficient fitted (k rows fit at most k − 3 terms): with three
rows the stack factor alone. ``benchmarks/calibration_trials.py`` with k = 3 and one term allowed: the term helped on
seed 001's rows (held-out tokens/s MAPE 20.5 → 17.2 % on the RTX PRO 6000) and hurt on llm-foundry's H100 rows
(6.5 → 10.1 %), pooled 14.3 → 14.6 %: three rows do not pin a term down."""

ELASTICITY_STEP = 0.05
"""Log step of the finite difference that measures an elasticity (a 5 % change of the coefficient)."""

FIT_STEP = 0.5
"""Nelder–Mead's first step, log units (a factor 1.65)."""

FIT_MAX_EVALUATIONS = 600
"""Nelder–Mead budget of one refit (k rows × 600 predictions: well under a second for k = 3)."""

TERM_CANDIDATES: tuple[str, ...] = (
    "matmul_efficiency",
    "attention_efficiency",
    "bandwidth_efficiency",
    "cpu_adam_params_per_s",
    "zero3_module_fetch_s",
    "lora_target_cpu_s",
    "qlora_linear_cpu_s",
)
"""The time coefficients a user's rows may identify; the first two per measured GPU (their own key), the rest global."""

PER_GPU_FIELDS = ("matmul_efficiency", "attention_efficiency")
"""Per-GPU tables: a refit writes the measured GPU's own key, leaving every other GPU's value as it was."""

Name = tuple[str, str | None]
"""A fitted coefficient: (CostCoefficients field, GPU key in its table or None)."""

STACK: Name = ("time_scale", None)
"""The stack factor's name in a fit."""


@dataclass(frozen=True)
class StackFit:
    """The refit coefficients and what was fitted.

    Attributes:
        coefficients: the start with the fitted values set.
        fitted: the names fitted (the stack factor first).
        spreads: each candidate term's elasticity spread over the rows (:func:`elasticity_spreads`).
        evidence: what the rows say about the stack factor (:func:`stack_evidence`); None for no rows.
    """

    coefficients: CostCoefficients
    fitted: tuple[Name, ...]
    spreads: dict[Name, float]
    evidence: StackEvidence | None = None
    prior_log_sigmas: tuple[float, ...] = ()
    """The prior σ of each fitted name, in the order of ``fitted`` (the MAP fit's penalty; ``held_out`` reads it)."""


def value_of(coefficients: CostCoefficients, name: Name, rows: Sequence[TimeRow]) -> float:
    """The coefficient ``name`` of ``coefficients`` (a per-GPU table's value for the GPU of one of ``rows``)."""
    field, key = name
    table = getattr(coefficients, field)
    if key is None:
        return float(table)
    gpu = next(r.case.cluster.gpu for r in rows if r.case.cluster.gpu.key == key)
    return efficiency(table, gpu)


def _bounded(field: str, value: float) -> float:
    if field == STACK[0]:
        return min(max(value, TIME_SCALE_MIN), TIME_SCALE_MAX)
    if field in BOUNDS:
        return min(max(value, BOUNDS[field][0]), BOUNDS[field][1])
    if field in UNBOUNDED_ABOVE_ONE:
        return value
    return min(1.0, value)


def with_values(coefficients: CostCoefficients, values: dict[Name, float]) -> CostCoefficients:
    """``coefficients`` with each named value set (clamped to its bounds: efficiencies ≤ 1, schema bounds)."""
    updates: dict[str, object] = {}
    tables: dict[str, dict[str, float]] = {}
    for (field, key), value in values.items():
        number = _bounded(field, value)
        if key is None:
            updates[field] = number
        else:
            tables.setdefault(field, dict(getattr(coefficients, field)))[key] = number
    return coefficients.model_copy(update={**updates, **tables})


def candidate_names(rows: Sequence[TimeRow]) -> list[Name]:
    """The term coefficients the rows could exercise: per-GPU tables for each measured GPU, the global fields."""
    gpus = sorted({r.case.cluster.gpu.key for r in rows})
    return [(f, g) for f in TERM_CANDIDATES if f in PER_GPU_FIELDS for g in gpus] + [
        (f, None) for f in TERM_CANDIDATES if f not in PER_GPU_FIELDS
    ]


def elasticity_spreads(rows: Sequence[TimeRow], start: CostCoefficients) -> dict[Name, float]:
    """Per candidate term: max − min over the rows of ∂ log t / ∂ log c at ``start`` (one-sided finite difference).

    The step goes down for coefficients capped at 1 (an efficiency at its cap would not move up).
    """
    base = [math.log(predicted_time_s(r, start)) for r in rows]
    spreads = {}
    for name in candidate_names(rows):
        value = value_of(start, name, rows)
        step = ELASTICITY_STEP if name[0] in UNBOUNDED_ABOVE_ONE else -ELASTICITY_STEP
        moved = with_values(start, {name: value * math.exp(step)})
        actual = math.log(value_of(moved, name, rows) / value)  # the clamp may shorten the step
        if actual == 0:
            spreads[name] = 0.0
            continue
        slopes = [(math.log(predicted_time_s(r, moved)) - b) / actual for r, b in zip(rows, base, strict=True)]
        spreads[name] = max(slopes) - min(slopes)
    return spreads


def identified_terms(spreads: dict[Name, float], row_count: int) -> list[Name]:
    """The terms to fit: spread ≥ ``MIN_ELASTICITY_SPREAD``, widest first, at most k − ``ROWS_PER_EXTRA_TERM``."""
    limit = max(0, row_count - ROWS_PER_EXTRA_TERM)
    ranked = sorted((n for n, s in spreads.items() if s >= MIN_ELASTICITY_SPREAD), key=lambda n: -spreads[n])
    return ranked[:limit]


def _normal_density(x: float, sigma: float) -> float:
    return math.exp(-0.5 * (x / sigma) ** 2) / sigma


@dataclass(frozen=True)
class StackEvidence:
    """What the rows say about the stack factor at the start (:func:`stack_evidence`).

    Attributes:
        mean_log_ratio: m, the rows' mean log(measured / predicted time) at the start (natural log; the GLS mean,
            ``coverage.gls_mean``).
        standard_error: se of that mean (``coverage.gls_mean``).
        same_stack_probability: the posterior probability, in [0, 1], that the start describes the rows' stack.
    """

    mean_log_ratio: float
    standard_error: float
    same_stack_probability: float

    @property
    def same_stack(self) -> bool:
        """True when the rows favour "the start describes this stack": the refit keeps the start's ``time_scale``."""
        return self.same_stack_probability >= 0.5


def stack_evidence(rows: Sequence[TimeRow], start: CostCoefficients) -> StackEvidence:
    """Which hypothesis the rows favour: the start describes their stack, or another stack (Bayes factor).

    H₀, "the start describes this stack": log ``time_scale`` is exactly the start's, and the rows' mean log ratio
    m = mean log(measured / predicted) is the setting-dependent error of the start, m ~ N(0, se²). H₁, "another
    stack": log ``time_scale`` ~ N(0, ``STACK_LOG_SIGMA``²), so m ~ N(0, ``STACK_LOG_SIGMA``² + se²). m and se are
    the generalized-least-squares mean and its standard error under Σ₀ = s² K + σ̂² I (``coverage.gls_mean``: σ̂ the
    rows' own scatter, :func:`row_log_sigma`; s² K the start's setting-dependent error, correlated between rows that
    lie close in the setting space): for rows far apart the plain mean and √(s² + σ̂²) / √k, for rows in one corner a
    standard error that does not fall below s, a correction there being as likely the corner's as the stack's. The
    Bayes factor B₀₁ is the ratio of the two densities at m
    (Jeffreys' test of a point hypothesis, *Theory of Probability* 1961 §5.2; Kass & Raftery, JASA 90 (1995) 773,
    eq. 1), and P(H₀ | rows) = p₀ B₀₁ / (p₀ B₀₁ + 1 − p₀) with p₀ = ``SAME_STACK_PROBABILITY``.

    The refit keeps the hypothesis the rows favour (:func:`fit_stack`) rather than averaging the two: under H₀ a factor
    fitted from k rows is their mean setting error, and on rows held out it adds that noise, the more surely the
    better the start already fits. Rows 2× off, or 20 % off and agreeing within a few per cent, select H₁; three
    rows scattered ±30 % around the start select H₀.

    Raises:
        ValueError: ``rows`` is empty.
    """
    if not rows:
        raise ValueError("stack_evidence needs at least one timed row")
    groups = replicate_groups(rows)
    means = [log_ratio(g.row, start) for g in groups]  # a setting's mean log ratio (its rows' geometric mean)
    points = [row_point(g.row) for g in groups]
    noise = row_log_sigma(row_log_ratios(groups, start)) ** 2
    offset = gls_mean(means, points, local_log_variance(start), noise, [g.count for g in groups])
    mean_ratio, standard_error = offset.mean, offset.standard_error
    same = SAME_STACK_PROBABILITY * _normal_density(mean_ratio, standard_error)
    other = (1 - SAME_STACK_PROBABILITY) * _normal_density(mean_ratio, math.hypot(STACK_LOG_SIGMA, standard_error))
    return StackEvidence(mean_ratio, standard_error, same / (same + other))


def stack_prior_log_sigma(evidence: StackEvidence, row_count: int) -> float | None:
    """The σ of the Gaussian prior on log ``time_scale`` for :func:`fit_stack`; None to keep the start's factor.

    None when the rows favour H₀ (:func:`stack_evidence`). Under H₁ the posterior mean of log ``time_scale`` shrinks m
    by s = ``STACK_LOG_SIGMA``² / (``STACK_LOG_SIGMA``² + se²); a prior of variance v = s se₀² / (1 − s), with se₀ =
    ``ROW_LOG_SIGMA`` / √k the standard error :func:`fit_stack`'s loss weighs the rows with, gives the same shrinkage
    and carries it into the joint fit with the term coefficients. Rows that scatter more (larger se) thus move the
    factor less than rows that agree.
    """
    if evidence.same_stack:
        return None
    variance = STACK_LOG_SIGMA**2 + evidence.standard_error**2
    shrink = STACK_LOG_SIGMA**2 / variance
    return math.sqrt(shrink / (1 - shrink)) * ROW_LOG_SIGMA / math.sqrt(row_count)


def row_log_sigma(ratios: Sequence[float]) -> float:
    """The rows' scatter of log(measured / predicted) about their mean: posterior of the scaled inverse-χ² prior.

    σ̂² = (ν₀ ``ROW_LOG_SIGMA``² + Σ (xᵢ − x̄)²) / (ν₀ + k − 1) with ν₀ = ``ROW_SIGMA_PRIOR_DOF`` (BDA3 §3.3); one row
    gives ``ROW_LOG_SIGMA``. Natural-log units.
    """
    mean_ratio = sum(ratios) / len(ratios)
    squares = sum((x - mean_ratio) ** 2 for x in ratios)
    return math.sqrt((ROW_SIGMA_PRIOR_DOF * ROW_LOG_SIGMA**2 + squares) / (ROW_SIGMA_PRIOR_DOF + len(ratios) - 1))


def fit_stack(rows: Sequence[TimeRow], start: CostCoefficients) -> StackFit:
    """MAP refit of the stack factor and the identified terms on ``rows`` (module docstring); ``start`` for no rows.

    The stack factor is fitted only when the rows favour "another stack" (:func:`stack_evidence`), with
    :func:`stack_prior_log_sigma`'s prior; otherwise it keeps the start's value exactly. Each term's prior is
    ``time_fit``'s σ around the start.
    """
    if not rows:
        return StackFit(start, (), {})
    groups = fitted_settings(replicate_groups(rows))  # one prediction per setting (``replicates``)
    settings = [g.row for g in groups]
    spreads = elasticity_spreads(settings, start)
    evidence = stack_evidence(member_rows(groups), start)
    stack_sigma = stack_prior_log_sigma(evidence, sum(g.count for g in groups))
    terms = identified_terms(spreads, len(groups))  # replicates of one setting identify no term
    names = terms if stack_sigma is None else [STACK, *terms]
    if not names:
        return StackFit(start, (), spreads, evidence)
    origin = [math.log(value_of(start, name, rows)) for name in names]
    sigmas = [] if stack_sigma is None else [stack_sigma]
    sigmas += [PRIOR_LOG_SIGMA_BY_FIELD.get(f, PRIOR_LOG_SIGMA) for f, _ in terms]

    def coefficients_at(point: Sequence[float]) -> CostCoefficients:
        return with_values(start, {name: math.exp(p) for name, p in zip(names, point, strict=True)})

    def loss(point: Sequence[float]) -> float:
        coefficients = coefficients_at(point)
        errors = sum(
            g.count * (math.log(predicted_time_s(g.row, coefficients) / g.row.measured_s) / ROW_LOG_SIGMA) ** 2
            for g in groups
        )
        penalty = sum(((p - o) / s) ** 2 for p, o, s in zip(point, origin, sigmas, strict=True))
        return errors + penalty

    best, _ = nelder_mead(loss, origin, step=FIT_STEP, max_evaluations=FIT_MAX_EVALUATIONS)
    return StackFit(coefficients_at(best), tuple(names), spreads, evidence, tuple(sigmas))


def log_ratio(row: TimeRow, coefficients: CostCoefficients) -> float:
    """log(measured / predicted) of one row."""
    return math.log(row.measured_s / predicted_time_s(row, coefficients))


def fitted_correction(
    rows: Sequence[TimeRow],
    start: CostCoefficients,
    fitted: CostCoefficients,
    population: Sequence[float] = (),
) -> LocalTimeCorrection:
    """The local correction (``coverage.local_correction``) of ``fitted``, :func:`fit_stack` on ``rows`` from ``start``.

    Residuals: each row's log ratio at ``fitted``; priors: the start's setting error (``coverage.local_log_variance``),
    present with the probability that the rows are another stack (:func:`stack_evidence`), and the rows' scatter at
    ``start`` (:func:`row_log_sigma`); the stack factor's prior variance ``STACK_LOG_SIGMA``² where it moved (the
    band's joint posterior of factor and correction), else 0. ``population``: the stacks' setting errors the band's
    amplitude is chosen among (``coverage.source_log_variances`` of the start's own rows).
    """
    groups = fitted_settings(replicate_groups(rows))
    noise = row_log_sigma(row_log_ratios(groups, start)) ** 2
    stack_variance = STACK_LOG_SIGMA**2 if fitted.time_scale != start.time_scale else 0.0
    residuals = [log_ratio(g.row, fitted) for g in groups]  # each setting's mean residual
    other_stack = 1 - stack_evidence(member_rows(groups), start).same_stack_probability
    variances = (local_log_variance(start), noise, stack_variance)
    return local_correction(groups, residuals, variances, other_stack, population)
