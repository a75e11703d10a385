"""The few-rows refit: the stack factor first, terms only where the rows vary them (autotune.calibration.stack_fit)."""

from __future__ import annotations

import math

import pytest
from time_rows import START, row

from autotune.calibration.coverage import local_log_variance
from autotune.calibration.held_out import loo_time_errors
from autotune.calibration.stack_fit import (
    MIN_ELASTICITY_SPREAD,
    ROW_LOG_SIGMA,
    STACK,
    elasticity_spreads,
    fit_stack,
    identified_terms,
    row_log_sigma,
    stack_evidence,
    stack_prior_log_sigma,
)
from autotune.calibration.time_fit import TimeRow

SPREAD = (
    {"seq_len": 256},
    {"seq_len": 8192, "method": "full"},
    {"seq_len": 2048, "method": "qlora", "micro_batch_size": 16},
)
"""Three settings far apart in the setting space (kernel correlations below 0.01): what spread-out rows look like."""


def spread(*scales: float) -> list[TimeRow]:
    """Rows at :data:`SPREAD`'s settings, each ``scale`` × the start's prediction."""
    return [row(scale, **options) for scale, options in zip(scales, SPREAD, strict=True)]


def test_rows_that_agree_with_the_start_keep_it_exactly_and_a_2x_slower_stack_moves_it_all_the_way() -> None:
    same = [row(1.01), row(0.99, seq_len=1024), row(1.02, seq_len=512)]
    slow = spread(2.0, 2.02, 1.98)
    kept = fit_stack(same, START)
    assert kept.coefficients == START and kept.fitted == ()
    assert kept.evidence is not None and kept.evidence.same_stack
    moved = fit_stack(slow, START)
    assert moved.fitted == (STACK,) and moved.coefficients.time_scale == pytest.approx(2.0, rel=0.03)
    # the same factor from three rows in one corner is shrunk more: the corner's own error could be it
    corner = fit_stack([row(2.0), row(2.02, seq_len=1024), row(1.98, seq_len=512)], START).coefficients.time_scale
    assert 1.0 < corner < moved.coefficients.time_scale
    assert moved.evidence is not None and moved.evidence.same_stack_probability < 0.01
    # the prior that carries "another stack" into the fit is wide (a factor 2 is well inside it)
    sigma = stack_prior_log_sigma(moved.evidence, len(slow))
    assert sigma is not None and sigma > 0.3
    assert stack_prior_log_sigma(kept.evidence, len(same)) is None


def test_the_evidence_is_a_bayes_factor_between_the_start_and_another_stack() -> None:
    """P(same stack) = p₀ N(m; 0, se) / (p₀ N(m; 0, se) + (1 − p₀) N(m; 0, √(σ₁² + se²))), worked by hand.

    Rows far apart: m is their plain mean and se² = (s² + σ̂²) / k (s² the start's setting error, σ̂² their scatter).
    """
    rows = spread(1.1, 1.2, 1.3)
    ratios = [math.log(1.1), math.log(1.2), math.log(1.3)]
    mean = sum(ratios) / 3
    scatter = (3 * ROW_LOG_SIGMA**2 + sum((x - mean) ** 2 for x in ratios)) / (3 + 2)
    se = math.sqrt((local_log_variance(START) + scatter) / 3)

    def density(x: float, sigma: float) -> float:
        return math.exp(-0.5 * (x / sigma) ** 2) / sigma

    same = 0.5 * density(mean, se)
    other = 0.5 * density(mean, math.sqrt(1.0 + se**2))
    evidence = stack_evidence(rows, START)
    assert evidence.mean_log_ratio == pytest.approx(mean, rel=0.01)
    assert evidence.standard_error == pytest.approx(se, rel=0.01)
    assert evidence.same_stack_probability == pytest.approx(same / (same + other), rel=0.02)
    with pytest.raises(ValueError, match="at least one timed row"):
        stack_evidence([], START)


def test_one_row_moves_the_factor_only_when_it_is_further_off_than_a_settings_own_error() -> None:
    # One row carries the prior scatter ROW_LOG_SIGMA and the start's setting error: 1.5× is within them (the local
    # correction takes it, near that row), 2.5× is not.
    assert fit_stack([row(1.1)], START).coefficients.time_scale == START.time_scale
    assert fit_stack([row(1.5)], START).coefficients.time_scale == START.time_scale
    assert 2.2 < fit_stack([row(2.5)], START).coefficients.time_scale < 2.5


def test_rows_that_disagree_with_each_other_move_the_stack_factor_less_than_rows_that_agree() -> None:
    # both sets measure 15 % slow on average (log mean); one agrees within 1 %, the other scatters by ±30 %
    agree = spread(1.6, 1.61, 1.59)
    scattered = spread(1.15, 1.15 * 1.35, 1.15 / 1.35)
    moved_agree = fit_stack(agree, START).coefficients.time_scale
    # ±30 % around +15 %: the setting-dependent error is larger than the offset, so the start is kept
    assert fit_stack(scattered, START).coefficients.time_scale == START.time_scale
    assert moved_agree == pytest.approx(1.6, rel=0.03)
    ratios = [math.log(1.15 * 1.35), math.log(1.15), math.log(1.15 / 1.35)]
    assert row_log_sigma([0.1]) == pytest.approx(ROW_LOG_SIGMA)
    assert row_log_sigma(ratios) > ROW_LOG_SIGMA > row_log_sigma([0.14, 0.14, 0.14])
    # a wider scatter shrinks the fitted factor more (twice as slow, scattered ±30 %, against ±1 %)
    tight = fit_stack(spread(2.0, 2.02, 1.98), START).coefficients.time_scale
    loose = fit_stack(spread(2.0, 2.7, 1.48), START).coefficients.time_scale
    assert 1.0 < loose < tight


def test_one_row_fits_the_stack_factor_alone_and_keeps_every_other_coefficient() -> None:
    fit = fit_stack([row(3.0)], START)
    assert fit.fitted == (STACK,)
    assert fit.coefficients.time_scale == pytest.approx(3.0, rel=0.1)
    assert fit.coefficients.model_copy(update={"time_scale": 1.0}) == START


def test_a_term_is_identified_only_where_the_rows_vary_its_share() -> None:
    """peft's per-target CPU cost: zero elasticity on full fine-tuning rows, positive on LoRA rows."""
    full_only = [row(1.0, method="full"), row(1.0, seq_len=1024, method="full")]
    mixed = [row(1.0), row(1.0, method="full")]
    lora_cpu = ("lora_target_cpu_s", None)
    assert elasticity_spreads(full_only, START)[lora_cpu] == 0.0
    spreads = elasticity_spreads(mixed, START)
    assert spreads[lora_cpu] > 0
    # another GPU's efficiency is not a candidate; the measured GPU's is
    assert ("matmul_efficiency", "rtx-4090") in spreads and ("matmul_efficiency", "h100-80gb") not in spreads
    # k rows fit at most k − 3 terms, the widest spread first, only those over the threshold
    wide = {("a", None): 0.5, ("b", None): 0.3, ("c", None): MIN_ELASTICITY_SPREAD / 2}
    assert identified_terms(wide, 3) == []
    assert identified_terms(wide, 4) == [("a", None)]
    assert identified_terms(wide, 10) == [("a", None), ("b", None)]


def test_leave_one_out_errors_predict_each_row_from_the_others() -> None:
    rows = spread(1.5, 1.5, 1.5 * 1.2)
    errors = loo_time_errors(rows, START)
    assert len(errors) == 3
    # the third row is 20 % off the other two: held out, it is predicted from their factor 1.5
    assert errors[2] == pytest.approx(1 / 1.2 - 1 + 0, abs=0.02) or errors[2] == pytest.approx(1 - 1 / 1.2, abs=0.02)
    assert max(errors[:2]) < errors[2]
    assert loo_time_errors(rows[:1], START) == []
    assert all(math.isfinite(e) for e in errors)
