"""Which settings to measure first: the K whose times most narrow the predictions you will choose among (issue 43).

Under the model of ``calibration/coverage.py`` the log time error of a setting x is g + h(x) + ε: a stack factor
every setting shares (variance σ_g² = ``stack_fit.STACK_LOG_SIGMA``²), the setting-dependent error (s² k(x, x'),
``costmodel.time_correction.kernel``) and a row's own noise (n² = ``stack_fit.ROW_LOG_SIGMA``²) — the priors of the
band ``calibrate`` prints once these rows are measured (``stack_fit.fitted_correction``). s² is that band's amplitude
before any row: the prior over the stacks' setting errors (``coverage.amplitude_prior`` of
``coverage.source_log_variances`` of the start's own rows), as the one amplitude whose 80 % band matches the
mixture's (``coverage.matched_amplitude``), so "±A % before any row, ±B % after these K" describes the band
``calibrate`` prints. Measuring x conditions the Gaussian on it; the predicted variance of every other setting c falls
by cov(c, x)² / (var(x) + n²).

:func:`greedy_variance_reduction` picks, K times, the candidate whose measurement lowers the summed predicted
variance over the plan space most, then conditions on it (the "active learning Cohn" criterion, Cohn, Ghahramani &
Jordan, JAIR 4 (1996) 129; greedy selection is within (1 − 1/e) of the best set for this monotone submodular
objective under the usual conditions, Krause, Singh & Guestrin, JMLR 9 (2008) 235, §4). The first pick is the most
typical setting (it measures the stack factor for all); the next ones go where the kernel says the first says little:
another method, another sequence length, more GPUs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from autotune.calibration import stack_fit
from autotune.calibration.cases import prepare_cases
from autotune.calibration.coverage import amplitude_prior, local_log_variance, matched_amplitude, source_log_variances
from autotune.calibration.time_fit import TimeRow, time_rows
from autotune.costmodel.params import count_params
from autotune.costmodel.time_correction import kernel, setting_point, time_band
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
        return cls(stack, matched_amplitude(weights, amplitudes, lambda s2: stack + s2 + noise), noise)


@dataclass(frozen=True)
class Selection:
    """The chosen candidates' indices, in pick order, and the mean predicted variance before and after each pick."""

    chosen: list[int]
    mean_variance: list[float]
    """Mean over the plan space of the predicted log-time variance (noise included): before any pick, then after
    each pick in turn (length K + 1)."""

    def mean_band(self, index: int) -> float:
        """The 80 % time band (``time_correction.time_band``) of ``mean_variance[index]``."""
        return time_band(self.mean_variance[index])


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
    return Selection(chosen, history)


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
