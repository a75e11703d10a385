"""Which of a few timed rows is not one stack's speed: a leave-one-out test against the rows' scatter prior (issue 43).

Each row's log ratio xᵢ = log(measured / predicted) at the start is compared with what the *other* rows predict for
it: their mean x̄₋ᵢ and their scatter σ̂₋ᵢ, the posterior of ``stack_fit``'s scaled inverse-χ² prior (``ROW_LOG_SIGMA``
worth ``ROW_SIGMA_PRIOR_DOF`` rows; Gelman et al., *Bayesian Data Analysis* 3rd ed., §3.3). Under that model the
held-out row's ratio follows a Student t with ν = ν₀ + (k − 1) − 1 degrees of freedom, centre x̄₋ᵢ and scale
σ̂₋ᵢ √(1 + 1 / (k − 1)) (BDA3 §3.2, the posterior predictive of a normal with unknown mean and variance). A row is an
outlier when that predictive gives it a two-sided tail probability below ``OUTLIER_TAIL_PROBABILITY`` *and* it is more
than ``OUTLIER_MIN_FACTOR`` off the others' mean ratio (a row 20 % off three that agree within 1 % is a setting, not a
mistake).

The rule it replaces flagged a row more than 3× off the median ratio. With three rows the median is one of them, so a
row 6× off survived when another was 2× off (the median then sat on the 2× row's side): here the 6× row is tested
against the 1× and 2× rows' mean and scatter, which it lies far outside.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from autotune.calibration import stack_fit
from autotune.calibration.replicates import member_rows, replicate_groups, row_log_ratios
from autotune.calibration.time_fit import TimeRow
from autotune.schemas.calibration import CostCoefficients

OUTLIER_TAIL_PROBABILITY = 0.02
"""Two-sided predictive tail probability below which a row is not one stack's speed (1 in 50: with three rows, one
fewer row kept by mistake than a 5 % test would leave, while a row 2× off two that agree (t ≈ 3) is still kept)."""

OUTLIER_MIN_FACTOR = 2.0
"""A row is named only when its ratio is also more than this factor off the others' mean (the issue's 2× row, a
setting-dependent error the start can have, stays in the fit; a time per optimizer step given as per micro-step, or a
17× CPU-offload run, is far beyond it)."""

MIN_ROWS_FOR_OUTLIERS = 3
"""Fewest timed rows with which a row can be called an outlier (two rows that disagree cannot say which is off)."""


NORMAL_DOF = 1000
"""Above this many degrees of freedom Student's t is taken as the standard normal (the series would run ν / 2 terms
per row: a file of 100,000 rows tests each against the other 99,999). The normal's CDF differs from t's by at most
about 0.16 / ν (0.005 at ν = 30), under 2·10⁻⁴ here: far below ``OUTLIER_TAIL_PROBABILITY``."""


def student_t_two_sided(t: float, dof: int) -> float:
    """P(|T| ≥ |t|) for Student's t with integer ``dof`` ≥ 1 (closed form, Abramowitz & Stegun 26.7.3–26.7.4).

    A(t | ν) = P(|T| < |t|) is, with θ = atan(|t| / √ν): for odd ν, (2/π)(θ + sin θ cos θ Σ) with
    Σ = 1 + (2/3) cos²θ + (2·4)/(3·5) cos⁴θ + … (ν − 3)/2 terms after the 1; for even ν, sin θ (1 + (1/2) cos²θ +
    (1·3)/(2·4) cos⁴θ + …) with (ν − 2)/2 terms after the 1. Returns 1 − A.

    Raises:
        ValueError: ``dof`` < 1.
    """
    if dof < 1:
        raise ValueError(f"Student t needs at least one degree of freedom, got {dof}")
    if dof > NORMAL_DOF:
        return math.erfc(abs(t) / math.sqrt(2))
    theta = math.atan(abs(t) / math.sqrt(dof))
    cos2 = math.cos(theta) ** 2
    term, total = 1.0, 1.0
    if dof % 2:
        for j in range(1, (dof - 1) // 2):
            term *= cos2 * (2 * j) / (2 * j + 1)
            total += term
        inside = 2 / math.pi * (theta + (math.sin(theta) * math.cos(theta) * total if dof > 1 else 0.0))
    else:
        for j in range(1, dof // 2):
            term *= cos2 * (2 * j - 1) / (2 * j)
            total += term
        inside = math.sin(theta) * total
    return min(max(1.0 - inside, 0.0), 1.0)


def loo_tail_probability(ratios: Sequence[float], index: int, prior_dof: int) -> float:
    """The two-sided predictive tail probability of ``ratios[index]`` given the other ratios (module docstring).

    ``ratios``: natural-log ratios, at least 3; ``prior_dof``: ν₀ of the scatter prior.
    """
    return _LeaveOneOut(ratios).tail(index, prior_dof)


class _LeaveOneOut:
    """The others' mean and scatter of each ratio from the ratios' totals: every row tested in O(k), not O(k²).

    The totals are taken about the ratios' mean (the remedy for the cancellation of Σx² − (Σx)² / k).
    """

    def __init__(self, ratios: Sequence[float]) -> None:
        self.ratios = ratios
        self.centre = sum(ratios) / len(ratios)
        deviations = [x - self.centre for x in ratios]
        self.total, self.squares = sum(deviations), sum(d * d for d in deviations)

    def others(self, index: int) -> tuple[float, float]:
        """(mean, Σ squared deviations about that mean) of the ratios other than ``ratios[index]``."""
        count = len(self.ratios) - 1
        x = self.ratios[index] - self.centre
        mean = (self.total - x) / count
        return self.centre + mean, max(self.squares - x * x - count * mean * mean, 0.0)

    def tail(self, index: int, prior_dof: int) -> float:
        """The two-sided predictive tail probability of ``ratios[index]`` (module docstring)."""
        mean, squares = self.others(index)
        count = len(self.ratios) - 1
        sigma = math.sqrt((prior_dof * stack_fit.ROW_LOG_SIGMA**2 + squares) / (prior_dof + count - 1))
        scale = sigma * math.sqrt(1 + 1 / count)
        return student_t_two_sided((self.ratios[index] - mean) / scale, prior_dof + count - 1)


def outlier_rows(rows: Sequence[TimeRow], start: CostCoefficients) -> list[TimeRow]:
    """The rows the others' ratios and scatter prior cannot account for (module docstring); none under 3 rows.

    Nothing is flagged when half the rows or more would be: the rows then disagree without a majority to trust. One
    prediction per setting (``replicates``).
    """
    if len(rows) < MIN_ROWS_FOR_OUTLIERS:
        return []
    groups = replicate_groups(rows)
    ordered = member_rows(groups)
    loo = _LeaveOneOut(row_log_ratios(groups, start))
    flagged = []
    for index, row in enumerate(ordered):
        mean, _ = loo.others(index)
        off = abs(loo.ratios[index] - mean)
        tail = loo.tail(index, stack_fit.ROW_SIGMA_PRIOR_DOF)  # as set now (--sensitivity)
        if off > math.log(OUTLIER_MIN_FACTOR) and tail < OUTLIER_TAIL_PROBABILITY:
            flagged.append(row)
    if 2 * len(flagged) >= len(rows):
        return []
    flagged_ids = {id(r) for r in flagged}
    return [r for r in rows if id(r) in flagged_ids]
