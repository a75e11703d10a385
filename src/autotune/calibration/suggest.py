"""Which settings to measure first: the K whose times most narrow the predictions you will choose among (issue 43).

Under the model of ``calibration/coverage.py`` the log time error of a setting x is g + h(x) + ε: a stack factor
every setting shares (variance σ_g² = ``stack_fit.STACK_LOG_SIGMA``²), the setting-dependent error (s² k(x, x'),
``costmodel.time_correction.kernel``) and a row's own noise (n² = ``stack_fit.ROW_LOG_SIGMA``²) — the priors of the
band ``calibrate`` prints once these rows are measured (``stack_fit.fitted_correction``). s² is that band's amplitude
before any row: the prior over the stacks' setting errors (``coverage.amplitude_prior`` of
``coverage.source_log_variances`` of the start's own rows), as the one amplitude whose 80 % band matches the
mixture's (``coverage.matched_amplitude``). Measuring x conditions the Gaussian on it; the predicted variance of every
other setting c falls by cov(c, x)² / (var(x) + n²).

"±A % before any row, ±B % after these K" (:func:`mixture_bands`) is the band ``calibrate`` prints, before the rows'
values are known: each amplitude s²ⱼ of the prior grid is conditioned on the K picks on its own (its posterior variance
at a setting, R&W eq. 2.26, does not depend on the measured values), and the band at a setting is the central 80 % of
the mixture Σⱼ P(s²ⱼ) N(0, vⱼ(x)) — the preposterior predictive of the setting's error: the rows will reweigh the
amplitudes (``coverage.scale_weights``), and before they are measured the expected posterior weights are the prior's
(Bayes' rule averaged over the prior predictive; Raiffa & Schlaifer, *Applied Statistical Decision Theory*, 1961,
§1.4, preposterior analysis). The single matched amplitude, conditioned on the picks, overstates that band: it matches
the mixture's band where the stack factor's variance dominates (no row), not where the rows have taken it away.

:func:`greedy_variance_reduction` picks, K times, the candidate whose measurement lowers the summed predicted
variance over the plan space most, then conditions on it (the "active learning Cohn" criterion, Cohn, Ghahramani &
Jordan, JAIR 4 (1996) 129; greedy selection is within (1 − 1/e) of the best set for this monotone submodular
objective under the usual conditions, Krause, Singh & Guestrin, JMLR 9 (2008) 235, §4). The first pick is the most
typical setting (it measures the stack factor for all); the next ones go where the kernel says the first says little:
another method, another sequence length, more GPUs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from autotune.calibration import stack_fit
from autotune.calibration.cases import prepare_cases
from autotune.calibration.coverage import (
    BAND_SHARE,
    amplitude_prior,
    inverse_spd,
    local_log_variance,
    matched_amplitude,
    mixture_quantile,
    source_log_variances,
)
from autotune.calibration.time_fit import TimeRow, time_rows
from autotune.costmodel.params import count_params
from autotune.costmodel.time_correction import kernel, quadratic_form, setting_point
from autotune.planner.request import PlanRequest
from autotune.planner.search import evaluate_candidates
from autotune.profiles.measurements import all_measurements
from autotune.schemas.calibration import CostCoefficients
from autotune.schemas.setting import TrainingSetting
from autotune.schemas.time_correction import SettingPoint
from autotune.schemas.workload import Workload


@dataclass(frozen=True)
class Candidate:
    """One setting of the plan space that fits, with its place in the setting space."""

    request: PlanRequest
    setting: TrainingSetting
    point: SettingPoint

    @property
    def workload(self) -> Workload:
        """The request's workload (its sequence length)."""
        return self.request.workload


def plan_space(requests: Sequence[PlanRequest]) -> list[Candidate]:
    """The settings that fit, over every request (one per sequence length), one per :class:`SettingPoint`.

    Settings that differ only where the kernel does not look (optimizer, accumulation, ...) are one point: the first
    the planner lists stands for them.
    """
    seen: set[SettingPoint] = set()
    found = []
    for request in requests:
        total = count_params(request.model).total_params
        for scored in evaluate_candidates(request):
            if not scored.estimate.fits:
                continue
            point = setting_point(total, scored.setting, request.workload, request.cluster.world_size)
            if point not in seen:
                seen.add(point)
                found.append(Candidate(request, scored.setting, point))
    return found


@dataclass(frozen=True)
class Variances:
    """The prior variances of the log time error (natural log): stack factor, setting error, row noise."""

    stack: float
    local: float
    noise: float
    amplitudes: tuple[float, ...] = ()
    """The prior grid of the setting error's amplitude s²ⱼ (``coverage.amplitude_prior``); empty: ``local`` alone."""
    weights: tuple[float, ...] = ()
    """P(s²ⱼ), one per amplitude, summing to 1."""

    def mixture(self) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """(amplitudes, weights) of the setting error's prior: the grid, or ``local`` with weight 1 without one."""
        return (self.amplitudes, self.weights) if self.amplitudes else ((self.local,), (1.0,))

    @classmethod
    def of(cls, coefficients: CostCoefficients, start_rows: Sequence[TimeRow]) -> Variances:
        """The priors of a refit from ``coefficients`` before any row (module docstring).

        ``start_rows``: the start's own timed rows (the shipped seed rows, as ``recalibrate`` takes them); s² is the
        amplitude :func:`coverage.matched_amplitude` matches to the prior mixture over
        ``amplitude_prior(source_log_variances(start_rows, coefficients))``, far from every row (no row yet) its
        variance g² + s² + n²; the start's own s² (``coverage.local_log_variance``) where no source has enough rows,
        as the band takes it.
        """
        stack, noise = stack_fit.STACK_LOG_SIGMA**2, stack_fit.ROW_LOG_SIGMA**2
        population = source_log_variances(start_rows, coefficients) or [local_log_variance(coefficients)]
        amplitudes, prior = amplitude_prior(population)
        weights = [p / sum(prior) for p in prior]
        local = matched_amplitude(weights, amplitudes, lambda s2: stack + s2 + noise)
        return cls(stack, local, noise, tuple(amplitudes), tuple(weights))


@dataclass(frozen=True)
class Selection:
    """The chosen candidates' indices, in pick order, and the mean predicted variance before and after each pick."""

    chosen: list[int]
    mean_variance: list[float]
    """Mean over the plan space of the predicted log-time variance (noise included) under the matched amplitude: before
    any pick, then after each pick in turn (length K + 1); the greedy criterion."""
    mean_bands: list[float]
    """Mean over the plan space of each setting's 80 % time band (:func:`mixture_bands`, a fraction): before any pick,
    then after each pick in turn (length K + 1)."""

    def mean_band(self, index: int) -> float:
        """``mean_bands[index]``: the mean 80 % time band after ``index`` picks."""
        return self.mean_bands[index]


def greedy_variance_reduction(points: Sequence[SettingPoint], k: int, variances: Variances) -> Selection:
    """Pick up to ``k`` of ``points`` by greedy reduction of the summed predicted variance (module docstring).

    Raises:
        ValueError: ``k`` < 1.
    """
    if k < 1:
        raise ValueError(f"suggest needs k ≥ 1, got {k}")
    size = len(points)
    cov = [[variances.stack + variances.local * kernel(a, b) for b in points] for a in points]
    chosen: list[int] = []
    history = [_mean_variance(cov, variances.noise)]
    for _ in range(min(k, size)):
        best, best_gain = -1, -1.0
        for x in range(size):
            if x in chosen:
                continue
            gain = sum(cov[c][x] ** 2 for c in range(size)) / (cov[x][x] + variances.noise)
            if gain > best_gain:
                best, best_gain = x, gain
        column = [cov[c][best] for c in range(size)]
        denominator = cov[best][best] + variances.noise
        cov = [[cov[i][j] - column[i] * column[j] / denominator for j in range(size)] for i in range(size)]
        chosen.append(best)
        history.append(_mean_variance(cov, variances.noise))
    return Selection(chosen, history, mixture_bands(points, chosen, variances))


def mixture_bands(points: Sequence[SettingPoint], chosen: Sequence[int], variances: Variances) -> list[float]:
    """The mean over ``points`` of each setting's 80 % time band after 0, 1, …, len(``chosen``) picks (fractions).

    At a setting x, after the picks C: the central 80 % (``coverage.mixture_quantile``) of Σⱼ wⱼ N(0, vⱼ(x)), with
    (s²ⱼ, wⱼ) the amplitude prior (:meth:`Variances.mixture`) and vⱼ(x) = g² + s²ⱼ + n² − cᵀ (A + n² I)⁻¹ c the
    posterior predictive variance of a measured time under s²ⱼ (R&W eq. 2.26; c = g² + s²ⱼ k(x, C), A = g² + s²ⱼ K_CC),
    as a band exp(q) − 1 (``time_correction.time_band`` for one normal). Module docstring: why the prior weights.
    """
    amplitudes, weights = variances.mixture()
    near = [[kernel(x, points[c]) for c in chosen] for x in points]  # k(x, C), shared by every amplitude
    bands = []
    for count in range(len(chosen) + 1):
        per_amplitude = [_posterior_variances(near, chosen[:count], s2, variances) for s2 in amplitudes]
        quantiles = [mixture_quantile(weights, [v[x] for v in per_amplitude], BAND_SHARE) for x in range(len(points))]
        bands.append(sum(math.expm1(q) for q in quantiles) / max(len(quantiles), 1))
    return bands


def _posterior_variances(
    near: Sequence[Sequence[float]], picks: Sequence[int], local: float, variances: Variances
) -> list[float]:
    """g² + s² + n² − cᵀ (A + n² I)⁻¹ c at every point (:func:`mixture_bands`), amplitude ``local``."""
    count = len(picks)
    prior = variances.stack + local + variances.noise
    if count == 0:
        return [prior] * len(near)
    gram = [
        [variances.stack + local * near[a][j] + (variances.noise if i == j else 0.0) for j in range(count)]
        for i, a in enumerate(picks)
    ]
    precision = inverse_spd(gram)
    found = []
    for row in near:
        cross = [variances.stack + local * k for k in row[:count]]
        found.append(max(prior - quadratic_form(cross, precision), variances.noise))
    return found


def _mean_variance(cov: Sequence[Sequence[float]], noise: float) -> float:
    return sum(cov[i][i] for i in range(len(cov))) / max(len(cov), 1) + noise


def suggest(
    requests: Sequence[PlanRequest], k: int, coefficients: CostCoefficients, start_rows: Sequence[TimeRow] | None = None
) -> tuple[list[Candidate], Selection]:
    """The plan space of ``requests`` and the ``k`` settings to measure first (:func:`greedy_variance_reduction`).

    ``start_rows``: the start's own timed rows (:meth:`Variances.of`); default the shipped measurements, the seed rows
    ``calibrate`` weighs the band's amplitude with.

    Raises:
        ValueError: ``k`` < 1.
    """
    space = plan_space(requests)
    rows = time_rows(prepare_cases(all_measurements())) if start_rows is None else start_rows
    selection = greedy_variance_reduction([c.point for c in space], k, Variances.of(coefficients, rows))
    return space, selection


def band_text(selection: Selection) -> str:
    """'mean 80 % time band over the plan space ±A % → ±B % after K rows'."""
    return (
        f"mean 80 % time band over the plan space ±{selection.mean_band(0) * 100:.0f} % before any row, "
        f"±{selection.mean_band(len(selection.chosen)) * 100:.0f} % after these {len(selection.chosen)}"
    )


def template_cells(candidate: Candidate) -> dict[str, object]:
    """The calibrate CSV's cells of one suggested setting: model, GPU, GPU count, sequence length, every setting field.

    The measured columns stay empty for the user to fill in.
    """
    request = candidate.request
    return {
        "model": request.model.key,
        "gpu": request.cluster.gpu.key,
        "num_gpus": request.cluster.world_size,
        "seq_len": candidate.workload.seq_len,
        **candidate.setting.model_dump(),
    }


def describe(candidate: Candidate) -> str:
    """'seq 2048, lora r16 mbs 2 × ga 16, ...': one suggested setting in words."""
    return f"seq {candidate.workload.seq_len}, {candidate.setting.short()}"
