"""The local time correction of a calibration: where a setting lies, how near the user's rows, what they say there.

A calibration fitted on a few rows (``autotune calibrate``) carries a Gaussian-process posterior on the log time
residual left after its stack factor (``schemas/time_correction.py``). For a setting x with kernel vector
k(x)ᵢ = k(x, anchorᵢ) the correction's mean and variance are the GP's (Rasmussen & Williams, *Gaussian Processes for
Machine Learning*, 2006, eqs. 2.25–2.26):

    mean(x) = s² k(x)ᵀ Σ⁻¹ r,    var(x) = g² + s² − c(x)ᵀ Σ_g⁻¹ c(x) + n²,   c(x)ᵢ = g² + s² k(x, anchorᵢ)

with s² the prior variance of the setting-dependent error, n² a row's own noise, g² the stack factor's prior
variance where it was fitted (0 where kept), Σ = s² K + n² I and Σ_g = g² 11ᵀ + Σ: the variance is the joint
posterior of factor and correction. Near the rows the mean is their residual and the variance small; far from
them (k → 0) the mean is 0 — the stack factor alone, "fades back toward the start" — and the variance the prior's
less what the rows say about the factor. The time band printed with a
prediction (:func:`time_band`) is the central 80 % interval of that log-normal.

The kernel is squared-exponential on base-2 logarithms with a fixed length per axis and a fixed distance for a
different method or sharding strategy (:data:`LENGTH_DOUBLINGS`, :data:`METHOD_DISTANCE`,
:data:`SHARDING_DISTANCE`): stated priors, not fitted (three rows cannot fit a length scale).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from autotune.costmodel.context import SettingContext
from autotune.schemas.calibration import TIME_SCALE_MAX, TIME_SCALE_MIN, CostCoefficients
from autotune.schemas.setting import TrainingSetting
from autotune.schemas.time_correction import LocalTimeCorrection, SettingPoint
from autotune.schemas.workload import Workload

LENGTH_DOUBLINGS: dict[str, float] = {
    "log2_seq_len": 2.0,
    "log2_micro_batch": 2.0,
    "log2_params_b": 2.0,
    "log2_gpus": 2.0,
}
"""Kernel length per numeric axis, in doublings: two rows 4× apart on one axis correlate e^(−½) ≈ 0.61. A stated
prior: the start's setting-dependent errors grow with sequence length and model size over factors of several
(issue 43's five foreign groups), not from one doubling to the next."""

METHOD_DISTANCE = 2.0
"""Scaled distance between two methods (full, lora, qlora): correlation e^(−2) ≈ 0.14. Seed 001's residuals after its
factor have opposite signs for QLoRA and LoRA on all three cards (docs/calibration.md), so a correction learned on one
method says little about another."""

SHARDING_DISTANCE = 1.0
"""Scaled distance between two sharding strategies: correlation e^(−½) ≈ 0.61 (the compute terms are shared, the
communication and hooks are not)."""

MAX_LOG_CORRECTION_LOW = math.log(TIME_SCALE_MIN)
MAX_LOG_CORRECTION_HIGH = math.log(TIME_SCALE_MAX)
"""Bounds of the log correction: the stack factor's own range (``schemas.calibration.TIME_SCALE_MIN`` / ``_MAX``,
0.1–10×), so a hand-edited calibration file cannot send a time to 0 or to overflow."""

BAND_Z = 1.2816
"""Standard-normal quantile of a central 80 % interval (Φ⁻¹(0.9)): the band :func:`time_band` prints."""


def setting_point(total_params: int, setting: TrainingSetting, workload: Workload, gpus: int) -> SettingPoint:
    """The :class:`SettingPoint` of one setting (``total_params``: ``params.count_params(model).total_params``)."""
    return SettingPoint(
        method=setting.method,
        sharding=setting.sharding,
        log2_seq_len=math.log2(workload.seq_len),
        log2_micro_batch=math.log2(setting.micro_batch_size),
        log2_params_b=math.log2(max(total_params, 1) / 1e9),
        log2_gpus=math.log2(max(gpus, 1)),
    )


def context_point(context: SettingContext) -> SettingPoint:
    """The :class:`SettingPoint` of a setting's context."""
    return setting_point(context.counts.total_params, context.setting, context.workload, context.cluster.world_size)


def correction_at(context: SettingContext, coefficients: CostCoefficients) -> tuple[float, float] | None:
    """(mean, variance) of the calibration's log time correction at ``context``; None without one."""
    correction = coefficients.local_time_correction
    return None if correction is None else log_correction(context_point(context), correction)


def scaled_distance_sq(a: SettingPoint, b: SettingPoint) -> float:
    """Σ over the axes of (Δ / length)², plus :data:`METHOD_DISTANCE`² and :data:`SHARDING_DISTANCE`² if they differ."""
    total = sum(((getattr(a, axis) - getattr(b, axis)) / length) ** 2 for axis, length in LENGTH_DOUBLINGS.items())
    total += METHOD_DISTANCE**2 * (a.method != b.method) + SHARDING_DISTANCE**2 * (a.sharding != b.sharding)
    return total


def kernel(a: SettingPoint, b: SettingPoint) -> float:
    """exp(−½ :func:`scaled_distance_sq`): 1 at the same point, → 0 far away (R&W eq. 2.16, per-axis lengths)."""
    return math.exp(-0.5 * scaled_distance_sq(a, b))


def log_correction(point: SettingPoint, correction: LocalTimeCorrection) -> tuple[float, float]:
    """(mean, variance) of log(time / time at the stack factor alone) at ``point`` (module docstring).

    The variance is the joint posterior of the stack factor and the correction (kernel g² + s² k(x, x')).
    """
    s2, g2 = correction.local_log_variance, correction.stack_log_variance
    near = [s2 * kernel(point, anchor) for anchor in correction.anchors]
    mean = sum(k * w for k, w in zip(near, correction.weights, strict=True))
    mean = min(max(mean, MAX_LOG_CORRECTION_LOW), MAX_LOG_CORRECTION_HIGH)
    return mean, _posterior_variance([g2 + k for k in near], correction)


def far_variance(correction: LocalTimeCorrection) -> float:
    """The variance of :func:`log_correction` at a setting far from every row (kernel 0)."""
    return _posterior_variance([correction.stack_log_variance] * len(correction.anchors), correction)


def quadratic_form(vector: Sequence[float], matrix: Sequence[Sequence[float]]) -> float:
    """vᵀ M v: with M = Σ⁻¹ and v = c(x), the variance the rows explain at x (R&W eq. 2.26's second term)."""
    return sum(
        vi * sum(m * vj for m, vj in zip(line, vector, strict=True)) for vi, line in zip(vector, matrix, strict=True)
    )


def _posterior_variance(cross: list[float], correction: LocalTimeCorrection) -> float:
    explained = quadratic_form(cross, correction.precision)
    prior = correction.stack_log_variance + correction.local_log_variance
    return max(prior - explained, 0.0) + correction.noise_log_variance


def time_band(variance: float) -> float:
    """The ± relative time band of a log-normal error of ``variance``: exp(:data:`BAND_Z` σ) − 1 (its wider side)."""
    return math.expm1(BAND_Z * math.sqrt(variance))
