"""Coverage as evidence: where in the setting space a few rows lie, and what that lets them say (issue 43).

The log ratio of a row, r = log(measured / predicted at the start), is modelled as

    r(x) = g + h(x) + ε,   g the stack factor (``stack_fit``), h ~ GP(0, s² k(x, x')), ε ~ N(0, n²)

— a parametric calibration plus a model-discrepancy function (Kennedy & O'Hagan, JRSS B 63 (2001) 425, eq. 5), the
discrepancy a Gaussian process over the setting (Rasmussen & Williams, *GPML* 2006, ch. 2; kernel and lengths in
``costmodel/time_correction.py``). Two consequences:

* **Evidence for a stack factor depends on coverage.** Under "the start describes this stack" (g = 0) the rows'
  ratios are N(0, Σ₀) with Σ₀ = s² K + n² I; rows in one corner share h, so their common offset is as well explained by
  h as by g. The generalized-least-squares mean m̂ = 1ᵀΣ₀⁻¹r / 1ᵀΣ₀⁻¹1 and its standard error se = (1ᵀΣ₀⁻¹1)^(−½)
  (:func:`gls_mean`) replace the plain mean and σ̂/√k in ``stack_fit.stack_evidence``'s Bayes factor — the same
  test, exactly, for rows far apart (K = I), a weaker one for rows in one corner (se → s).
* **A correction learned in a corner stays there.** After the stack factor, the rows' residuals give h's posterior
  (:func:`local_correction`), which applies in full at the rows and fades to 0 (the stack factor alone) away from
  them; its variance, hence the printed band, grows with the distance and far from the rows returns to the stack
  factor's posterior variance plus h's amplitude.

s² (:func:`local_log_variance`) is the start's own error: its 'default' time band read as the 90th percentile of
|log error| (``fit.BAND_QUANTILE``), so s = log(1 + band) / 1.645 — the prior of the stack factor's test and of the
correction's mean. The band's amplitude instead has a prior fitted to the setting errors of the stacks the start was
fitted on (:func:`source_log_variances`: each source's scatter once its own factor is known; :func:`amplitude_prior`),
weighed by how well each value explains the rows (:func:`scale_weights`): the start's band mixes the stacks' factors
into s², which the stack factor already carries, and a stack's setting error ranges ~30× between the stacks measured.
n² is the rows' scatter (``stack_fit.row_log_sigma``, the scaled inverse-χ² posterior).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from autotune.calibration.fit import BAND_MIN_ROWS
from autotune.calibration.replicates import Replicates
from autotune.calibration.time_fit import TimeRow, predicted_time_s
from autotune.costmodel.params import count_params
from autotune.costmodel.time_correction import BAND_Z, kernel, setting_point
from autotune.schemas.calibration import CostCoefficients, source_table
from autotune.schemas.time_correction import LocalTimeCorrection, SettingPoint

BAND_QUANTILE_Z = 1.6449
"""Φ⁻¹(0.95): the start's band is the 90th percentile of |error| (``fit.BAND_QUANTILE``), a central 90 % interval."""


def row_point(row: TimeRow) -> SettingPoint:
    """The row's :class:`SettingPoint` (``costmodel.time_correction.setting_point``)."""
    case = row.case
    total = count_params(case.model).total_params
    return setting_point(total, case.measurement.setting, case.measurement.workload, case.cluster.world_size)


def local_log_variance(start: CostCoefficients) -> float:
    """s²: the start's setting-dependent log error, from its 'default' time band (module docstring)."""
    band = start.time_error_band.get("default", 0.35)
    return (math.log1p(band) / BAND_QUANTILE_Z) ** 2


def covariance(
    points: Sequence[SettingPoint], local: float, noise: float, counts: Sequence[int] | None = None
) -> list[list[float]]:
    """Σ₀ = ``local`` · K + ``noise`` · diag(1 / count) over ``points`` (``counts``: rows per point, default 1 each).

    A point measured c times enters with its rows' mean and noise / c (``replicates``).
    """
    counts = counts or [1] * len(points)
    return [
        [local * kernel(a, b) + (noise / counts[i] if i == j else 0.0) for j, b in enumerate(points)]
        for i, a in enumerate(points)
    ]


def cholesky(matrix: Sequence[Sequence[float]]) -> list[list[float]]:
    """L, lower triangular, with L Lᵀ = ``matrix`` (symmetric positive definite; Cholesky–Banachiewicz).

    Raises:
        ValueError: the matrix is not positive definite.
    """
    size = len(matrix)
    lower = [[0.0] * size for _ in range(size)]
    for i in range(size):
        for j in range(i + 1):
            total = matrix[i][j] - sum(lower[i][k] * lower[j][k] for k in range(j))
            if i == j:
                if total <= 0:
                    raise ValueError("matrix is not positive definite")
                lower[i][i] = math.sqrt(total)
            else:
                lower[i][j] = total / lower[j][j]
    return lower


def inverse_spd(matrix: Sequence[Sequence[float]]) -> list[list[float]]:
    """Inverse of a symmetric positive-definite matrix by Cholesky (L Lᵀ = A, then A⁻¹ = L⁻ᵀ L⁻¹).

    Raises:
        ValueError: the matrix is not positive definite.
    """
    size = len(matrix)
    lower = cholesky(matrix)
    inverse_lower = [[0.0] * size for _ in range(size)]  # L⁻¹, lower triangular, by forward substitution
    for col in range(size):
        for i in range(col, size):
            total = (1.0 if i == col else 0.0) - sum(lower[i][k] * inverse_lower[k][col] for k in range(col, i))
            inverse_lower[i][col] = total / lower[i][i]
    return [
        [sum(inverse_lower[k][i] * inverse_lower[k][j] for k in range(max(i, j), size)) for j in range(size)]
        for i in range(size)
    ]


def forward_solve(lower: Sequence[Sequence[float]], values: Sequence[float]) -> list[float]:
    """L⁻¹ v for a lower-triangular L (:func:`cholesky`), by forward substitution: vᵀ (L Lᵀ)⁻¹ v = |L⁻¹ v|²."""
    solved: list[float] = []
    for i, value in enumerate(values):
        solved.append((value - sum(lower[i][k] * solved[k] for k in range(i))) / lower[i][i])
    return solved


def log_normal_density(values: Sequence[float], cov: Sequence[Sequence[float]]) -> float:
    """Log-density of N(0, ``cov``) at ``values``: −½ (vᵀ C⁻¹ v + log det C + k log 2π), by Cholesky (R&W eq. 2.30)."""
    lower = cholesky(cov)
    solved = forward_solve(lower, values)
    log_det = 2 * sum(math.log(lower[i][i]) for i in range(len(values)))
    return -0.5 * (sum(x * x for x in solved) + log_det + len(values) * math.log(2 * math.pi))


PROBABILITY_FLOOR = 1e-9
"""The slab's prior probability is kept within [this, 1 − this], so that the rows' Bayes factor can still move it."""


def setting_error_probability(
    residuals: Sequence[float],
    points: Sequence[SettingPoint],
    variances: tuple[float, float],
    counts: Sequence[int],
    other_stack: float,
) -> float:
    """P(h ≠ 0 | rows): the posterior probability that the rows' stack has a setting-dependent error h (Bayes factor).

    ``variances``: (s², n²). H₁: r̄ ~ N(0, s² K + n² D) (a discrepancy h ~ GP(0, s² k), Kennedy & O'Hagan 2001); H₀:
    r̄ ~ N(0, n² D) (the settings' mean residuals after the stack factor are their rows' noise, D = diag(1 / count)).
    The prior probability of H₁ is ``other_stack``, P(another stack | rows) of ``stack_fit.stack_evidence``: s² is the
    error of the start on the *other* stacks it was fitted to, while a stack the start describes is the one its fit
    followed, with its in-sample error (the core's runs: 1–3 %, the noise). The Bayes factor is the ratio of the two
    marginal likelihoods (Kass & Raftery, JASA 90 (1995) 773, eq. 1). The result is the slab weight of a
    spike-and-slab prior on h (Mitchell & Beauchamp, JASA 83 (1988) 1023; George & McCulloch, JASA 88 (1993) 881):
    :func:`local_correction` gives h the moment-matched prior variance P(h ≠ 0 | rows) · s², so a correction the rows
    do not support fades to the stack factor alone — on the core's own runs it stays off (``core_loo``).
    """
    local, noise = variances
    counts = list(counts)
    with_h = log_normal_density(residuals, covariance(points, local, noise, counts))
    without = log_normal_density(residuals, covariance(points, 0.0, noise, counts))
    prior = min(max(other_stack, PROBABILITY_FLOOR), 1 - PROBABILITY_FLOOR)
    log_odds = with_h - without + math.log(prior / (1 - prior))
    return 1 / (1 + math.exp(-log_odds)) if log_odds > -700 else 0.0


def _times(matrix: Sequence[Sequence[float]], vector: Sequence[float]) -> list[float]:
    return [sum(a * b for a, b in zip(line, vector, strict=True)) for line in matrix]


@dataclass(frozen=True)
class GlsMean:
    """The rows' common log offset under Σ₀ (:func:`gls_mean`): mean and its standard error, natural log."""

    mean: float
    standard_error: float


def gls_mean(
    ratios: Sequence[float],
    points: Sequence[SettingPoint],
    local: float,
    noise: float,
    counts: Sequence[int] | None = None,
) -> GlsMean:
    """m̂ = 1ᵀΣ₀⁻¹r / 1ᵀΣ₀⁻¹1 and se = (1ᵀΣ₀⁻¹1)^(−½) (Aitken's generalized least squares for a constant).

    With K = I (rows far apart) it is the plain mean with se² = (s² + n²) / k; with K = 11ᵀ (one corner) se² =
    s² + n² / k, which more rows in the same corner do not shrink below s². ``ratios`` may be the mean log ratios of
    settings measured ``counts`` times (``replicates``).
    """
    precision = inverse_spd(covariance(points, local, noise, counts))
    weights = [sum(line) for line in precision]  # Σ₀⁻¹ 1 (symmetric)
    total = sum(weights)
    return GlsMean(sum(w * r for w, r in zip(weights, ratios, strict=True)) / total, 1 / math.sqrt(total))


def source_log_variances(rows: Sequence[TimeRow], start: CostCoefficients) -> list[float]:
    """Each stack's setting-dependent log error at ``start``: one variance per source the start was fitted on.

    ``rows``: the start's own timed rows (the seed rows; in ``calibration_trials.py`` the blind start's). Per source
    table (``schemas.calibration.source_table``: one training stack) with at least ``fit.BAND_MIN_ROWS`` rows, the
    sample variance of log(measured / predicted) about the source's mean — what is left of that stack's error once its
    own factor is known, i.e. the s² of its discrepancy h (Kennedy & O'Hagan 2001). The stacks differ by a factor of
    ~30 in it (the core's runs ~0.01, llm-foundry ~0.09, seed 001 ~0.2, seed 003 ~0.34 in log sd at the shipped fit),
    so the band takes a posterior over a prior fitted to them (:func:`amplitude_prior`, :func:`scale_weights`) rather
    than one pooled value. In-sample errors of
    the start's fit: ~15 coefficients over ~190 rows make them slightly optimistic.
    """
    by_source: dict[str, list[float]] = {}
    for row in rows:
        ratio = math.log(row.measured_s / predicted_time_s(row, start))
        by_source.setdefault(source_table(row.case.measurement.source), []).append(ratio)
    variances = []
    for ratios in by_source.values():
        if len(ratios) >= BAND_MIN_ROWS:
            mean = sum(ratios) / len(ratios)
            variances.append(sum((x - mean) ** 2 for x in ratios) / (len(ratios) - 1))
    return variances


def scale_weights(
    residuals: Sequence[float],
    points: Sequence[SettingPoint],
    variances: tuple[float, float],
    counts: Sequence[int],
    population: Sequence[float],
    prior: Sequence[float] | None = None,
) -> list[float]:
    """P(s² = s²ⱼ | rows) for each s²ⱼ of ``population`` (``prior``: its prior weights, default equal).

    ``variances``: (g², n²), the stack factor's prior variance (0 where it was kept) and the rows' noise. The rows'
    ``residuals`` are N(0, g² 11ᵀ + s²ⱼ K + n² D) under s²ⱼ (the model of the module docstring with the factor
    integrated out where it was fitted, so that its rows then only speak through their differences); the weights
    are the prior times the marginal likelihoods (R&W eq. 2.30), normalised: the hyperparameter posterior of R&W §5.2
    eq. 5.5 over a discrete prior on the amplitude (:func:`amplitude_prior`).
    """
    stack, noise = variances
    logs = [
        log_normal_density(residuals, [[stack + v for v in line] for line in covariance(points, s2, noise, counts)])
        for s2 in population
    ]
    top = max(logs)
    posterior = [math.exp(x - top) * p for x, p in zip(logs, prior or [1.0] * len(logs), strict=True)]
    total = sum(posterior)
    return [x / total for x in posterior]


AMPLITUDE_GRID_POINTS = 25
"""Points of the quadrature over log s² in :func:`amplitude_prior` (±3 standard deviations, 0.25 apart)."""


def amplitude_prior(population: Sequence[float]) -> tuple[list[float], list[float]]:
    """(grid of s², prior weights): a log-normal over the stacks' setting-error variances, fitted to ``population``.

    The stacks the start was fitted on (:func:`source_log_variances`) are draws from the population of stacks; a new
    stack's log s² is modelled as normal with their mean and sample standard deviation (the hierarchical model's
    hyperparameters estimated from the groups seen, Gelman et al., *BDA3* §5.3 — empirical Bayes), so it may lie
    between or beyond them, as llm-foundry's lies between the core's and seed 001's. Evaluated on
    :data:`AMPLITUDE_GRID_POINTS` points within ±3 sd (the normal's density as weights); one stack (or stacks that
    agree exactly) gives its own value alone.
    """
    logs = [math.log(max(v, MIN_AMPLITUDE)) for v in population]
    centre = sum(logs) / len(logs)
    spread = math.sqrt(sum((x - centre) ** 2 for x in logs) / (len(logs) - 1)) if len(logs) > 1 else 0.0
    if spread == 0:
        return [math.exp(centre)], [1.0]
    steps = AMPLITUDE_GRID_POINTS - 1
    grid = [centre + spread * (-3 + 6 * i / steps) for i in range(AMPLITUDE_GRID_POINTS)]
    return [math.exp(x) for x in grid], [math.exp(-0.5 * ((x - centre) / spread) ** 2) for x in grid]


MIN_AMPLITUDE = 1e-6
"""Smallest s² :func:`amplitude_prior` takes the log of (a stack fitted exactly by its own rows: 0.1 % in log sd)."""


def local_correction(
    groups: Sequence[Replicates],
    residuals: Sequence[float],
    variances: tuple[float, float, float],
    other_stack: float = 1.0,
    population: Sequence[float] = (),
) -> LocalTimeCorrection:
    """The posterior of h from the settings' mean ``residuals`` (log(measured / predicted) after the stack factor).

    ``variances``: (s², n², g²) — the start's setting error (:func:`local_log_variance`), the rows' noise and the
    stack factor's prior variance where it was fitted (0 where kept).

    **Mean.** h's prior variance for the mean is s² × :func:`setting_error_probability` (the rows' evidence for h at
    all, from the prior ``other_stack``, the probability that the rows are another stack than the start's), and the
    correction is on only where that probability is at least ½ (as the stack factor keeps the hypothesis the rows
    favour: averaging would carry a few rows' noise to their neighbours).

    **Band.** The posterior predictive variance at a setting x (R&W eq. 2.26, Kennedy & O'Hagan 2001): the joint
    posterior of g + h(x) plus a row's noise, with h's amplitude s² weighed by the rows (:func:`scale_weights`) under
    a prior fitted to ``population`` (:func:`amplitude_prior` of :func:`source_log_variances`; the start's s² alone
    when empty), written as the amplitude whose far band matches that mixture's (:func:`matched_amplitude`). The
    rows narrow it near them; far from them it returns to the stack factor's posterior variance plus that amplitude —
    rows in one corner say which kind of stack they are (their agreement), never that h is 0 elsewhere.
    """
    local, noise, stack_variance = variances
    points = [row_point(g.row) for g in groups]
    counts = [g.count for g in groups]
    slab = setting_error_probability(residuals, points, (local, noise), counts, other_stack)
    mean_local = local * slab  # the spike-and-slab prior's moment-matched variance
    mean_weights = _times(inverse_spd(covariance(points, mean_local, noise, counts)), residuals)
    amplitudes, prior = amplitude_prior(list(population) or [local])
    weights = scale_weights(residuals, points, (stack_variance, noise), counts, amplitudes, prior)

    def joint_at(s2: float) -> list[list[float]]:  # the rows' covariance under amplitude s², factor integrated out
        return [[stack_variance + v for v in line] for line in covariance(points, s2, noise, counts)]

    def far_at(s2: float) -> float:  # far_variance(band_at(s2)) by one Cholesky solve, without the full inverse
        if stack_variance == 0:  # far from the rows nothing is explained: g² + s² + n² − 0
            return s2 + noise
        explained = sum(x * x for x in forward_solve(cholesky(joint_at(s2)), [stack_variance] * len(points)))
        return max(stack_variance + s2 - explained, 0.0) + noise

    def band_at(s2: float) -> LocalTimeCorrection:
        joint = joint_at(s2)
        ratio = mean_local / s2 if s2 > 0 else 0.0  # s²_band k(x)ᵀ w' = s² P k(x)ᵀ Σ⁻¹ r: the same mean
        return LocalTimeCorrection(
            anchors=points,
            row_ids=[_label(g) for g in groups],
            weights=[w * ratio if slab >= 0.5 else 0.0 for w in mean_weights],
            precision=inverse_spd(joint),
            local_log_variance=s2,
            noise_log_variance=noise,
            stack_log_variance=stack_variance,
        )

    return band_at(matched_amplitude(weights, amplitudes, far_at))


def mixture_quantile(weights: Sequence[float], variances: Sequence[float], share: float) -> float:
    """The q with Σ wⱼ P(|N(0, vⱼ)| ≤ q) = ``share``: the central interval of a scale mixture of normals (bisection).

    ``weights`` sum to 1; ``variances`` > 0, natural-log units; q in the same units (one normal: Φ⁻¹((1 + share) / 2)
    √v). The band's mixture far from the rows (:func:`matched_amplitude`) and ``--suggest``'s after K rows.
    """

    def covered(q: float) -> float:
        return sum(w * math.erf(q / math.sqrt(2 * v)) for w, v in zip(weights, variances, strict=True))

    low, high = 0.0, 10 * math.sqrt(max(variances))
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if covered(middle) < share else (low, middle)
    return (low + high) / 2


BAND_SHARE = 0.8
"""The printed band's central share (``costmodel.time_correction.BAND_Z`` is its normal quantile)."""


def matched_amplitude(
    weights: Sequence[float], population: Sequence[float], far_variance_at: Callable[[float], float]
) -> float:
    """The amplitude s² whose far-from-the-rows 80 % band is the mixture's over ``population`` (bisection).

    ``weights``: P(s² = s²ⱼ), summing to 1 (:func:`scale_weights` after rows, the normalised :func:`amplitude_prior`
    before any); ``far_variance_at(s²)``: the predictive log variance far from every row under amplitude s²
    (``time_correction.far_variance`` of the correction, or g² + s² + n² before any row), increasing in s². There
    the posterior predictive is a scale mixture of normals, N(0, vⱼ) with weight wⱼ (vⱼ = ``far_variance_at(s²ⱼ)``):
    heavier-tailed than one normal, so its central 80 % interval is narrower than that of a normal of the mixture's
    variance. The result is the one whose normal band equals the mixture's there (a correction file holds one GP; near
    the rows every s²ⱼ gives about the same, small, band); ``calibrate``'s band (:func:`local_correction`) and
    ``--suggest``'s prior (``suggest.Variances``) are both this amplitude.
    """
    far = [far_variance_at(s2) for s2 in population]
    target = (mixture_quantile(weights, far, BAND_SHARE) / BAND_Z) ** 2
    low, high = min(population), max(population)
    for _ in range(50):
        middle = (low + high) / 2
        low, high = (middle, high) if far_variance_at(middle) < target else (low, middle)
    return (low + high) / 2


def _label(group: Replicates) -> str:
    first = group.row.case.measurement.id
    return first if group.count == 1 else f"{first} (+{group.count - 1} rows of its setting)"


def _span(values: Sequence[float], unit: str = "") -> str:
    low, high = min(values), max(values)
    return f"{low:g}{unit}" if math.isclose(low, high) else f"{low:g}–{high:g}{unit}"


def corner(points: Sequence[SettingPoint]) -> str:
    """The part of the setting space ``points`` cover, in words: 'lora; seq 512–1024; micro batch 1; ...'."""
    seqs = [round(2**p.log2_seq_len) for p in points]
    batches = [round(2**p.log2_micro_batch) for p in points]
    params = [round(2**p.log2_params_b, 1) for p in points]
    gpus = [round(2**p.log2_gpus) for p in points]
    return (
        f"method {', '.join(sorted({p.method for p in points}))}; seq {_span(seqs)}; micro batch {_span(batches)}; "
        f"sharding {', '.join(sorted({p.sharding for p in points}))}; model {_span(params, 'B')} parameters; "
        f"{_span(gpus)} GPU(s)"
    )
