"""Coverage as evidence: rows in one corner correct that corner, rows spread out move the stack factor."""

from __future__ import annotations

import math

import pytest
from time_rows import START, from_source, row

from autotune.calibration.coverage import (
    AMPLITUDE_GRID_POINTS,
    BAND_SHARE,
    amplitude_prior,
    covariance,
    gls_mean,
    inverse_spd,
    local_correction,
    log_normal_density,
    mixture_quantile,
    row_point,
    scale_weights,
    setting_error_probability,
    source_log_variances,
)
from autotune.calibration.recalibrate import recalibrate
from autotune.calibration.replicates import replicate_groups
from autotune.calibration.time_fit import predicted_time_s
from autotune.costmodel.time_correction import BAND_Z, far_variance, kernel, log_correction, time_band


def test_inverse_spd_inverts() -> None:
    matrix = [[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]]
    inverse = inverse_spd(matrix)
    for i in range(3):
        for j in range(3):
            assert sum(matrix[i][k] * inverse[k][j] for k in range(3)) == pytest.approx(float(i == j), abs=1e-12)
    with pytest.raises(ValueError, match="positive definite"):
        inverse_spd([[1.0, 2.0], [2.0, 1.0]])


def test_rows_in_one_corner_do_not_shrink_the_standard_error_below_the_local_prior() -> None:
    corner = [row(1.0, seq_len=512), row(1.0, seq_len=512, micro_batch_size=1), row(1.0, seq_len=512)]
    spread = [row(1.0, seq_len=256), row(1.0, seq_len=8192, method="full"), row(1.0, seq_len=2048, method="qlora")]
    ratios = [0.1, 0.3, 0.2]
    local, noise = 0.09, 0.01
    same = gls_mean(ratios, [row_point(r) for r in corner], local, noise)
    apart = gls_mean(ratios, [row_point(r) for r in spread], local, noise)
    assert same.mean == pytest.approx(0.2)  # one point: every row weighs the same
    assert same.standard_error == pytest.approx(math.sqrt(local + noise / 3))
    assert apart.standard_error < same.standard_error
    assert math.sqrt((local + noise) / 3) <= apart.standard_error


def test_a_correction_learned_in_one_corner_applies_there_and_fades_away_from_it() -> None:
    """Three LoRA rows at seq ≤ 1024 agreeing within 4 % at 1.6× the start: the issue's corner case."""
    corner = [row(1.6, seq_len=512), row(1.62, seq_len=1024), row(1.56, seq_len=768, micro_batch_size=2)]
    result = recalibrate(
        [r.case for r in corner], START, start_name="s", sources=[], with_seeds=False, name="x", seed_cases=[]
    )
    fitted = result.coefficients
    assert fitted.local_time_correction is not None
    for r in corner:  # near the rows: corrected
        assert predicted_time_s(r, fitted) / r.measured_s == pytest.approx(1.0, abs=0.1)
    far = row(1.0, seq_len=8192, method="full", micro_batch_size=4)  # full fine-tuning, 8192 tokens, micro batch 4
    start_far, fitted_far = predicted_time_s(far, START), predicted_time_s(far, fitted)
    assert fitted_far / start_far < 1.3  # away from them: back toward the start, not 1.6×
    point_near, point_far = row_point(corner[0]), row_point(far)
    assert kernel(point_near, point_far) < 0.05
    band_near = time_band(log_correction(point_near, fitted.local_time_correction)[1])
    band_far = time_band(log_correction(point_far, fitted.local_time_correction)[1])
    assert band_far > band_near  # the band widens with the distance


def test_rows_spread_over_the_space_move_the_stack_factor_everywhere() -> None:
    spread = [row(1.6, seq_len=256), row(1.62, seq_len=8192, method="full"), row(1.58, seq_len=2048, method="qlora")]
    result = recalibrate(
        [r.case for r in spread], START, start_name="s", sources=[], with_seeds=False, name="x", seed_cases=[]
    )
    assert result.coefficients.time_scale == pytest.approx(1.6, rel=0.05)
    far = row(1.0, seq_len=4096, micro_batch_size=4)
    assert predicted_time_s(far, result.coefficients) / predicted_time_s(far, START) == pytest.approx(1.6, rel=0.1)


def test_log_normal_density_is_the_gaussians() -> None:
    cov = [[0.04, 0.01], [0.01, 0.09]]
    values = [0.1, -0.2]
    det = 0.04 * 0.09 - 0.01**2
    inverse = inverse_spd(cov)
    quadratic = sum(values[i] * inverse[i][j] * values[j] for i in range(2) for j in range(2))
    assert log_normal_density(values, cov) == pytest.approx(
        -0.5 * (quadratic + math.log(det) + 2 * math.log(2 * math.pi))
    )


def test_a_setting_error_needs_residuals_beyond_the_noise_and_a_stack_the_start_does_not_describe() -> None:
    """Residuals at the rows' noise say 'no setting error'; residuals far beyond it, on another stack, say 'one'."""
    points = [row_point(r) for r in (row(1.0, seq_len=256), row(1.0, seq_len=8192, method="full"), row(1.0))]
    local, noise = 0.09, 0.005
    quiet = setting_error_probability([0.01, -0.02, 0.01], points, (local, noise), [1, 1, 1], 0.5)
    loud = setting_error_probability([0.4, -0.35, 0.05], points, (local, noise), [1, 1, 1], 0.5)
    assert quiet < 0.5 < loud
    # a stack the start describes (the rows favour it) keeps its in-sample error: the same residuals say less
    assert setting_error_probability([0.4, -0.35, 0.05], points, (local, noise), [1, 1, 1], 1e-6) < loud
    assert setting_error_probability([0.01, -0.02, 0.01], points, (local, noise), [1, 1, 1], 0.0) < 1e-6


def test_each_source_gives_the_scatter_of_its_rows_about_its_own_factor() -> None:
    """Two stacks, one 2× slow and tight, one on the start and scattered: the factor is not part of either variance."""
    slow = [from_source(row(2.0 * f, seq_len=s), "tight") for f, s in ((0.95, 256), (1.0, 1024), (1.05, 4096))]
    loose = [from_source(row(f, seq_len=s), "loose") for f, s in ((0.7, 256), (1.0, 1024), (1.4, 4096))]
    lone = [from_source(row(3.0), "single")]  # too few rows for a variance of its own
    variances = source_log_variances([*slow, *loose, *lone], START)

    def sample_variance(factors: tuple[float, ...]) -> float:
        logs = [math.log(f) for f in factors]
        mean = sum(logs) / len(logs)
        return sum((x - mean) ** 2 for x in logs) / (len(logs) - 1)

    assert variances == pytest.approx([sample_variance((0.95, 1.0, 1.05)), sample_variance((0.7, 1.0, 1.4))])


def test_rows_that_agree_across_the_space_favour_a_small_setting_error_and_scattered_rows_a_large_one() -> None:
    points = [row_point(r) for r in (row(1.0, seq_len=256), row(1.0, seq_len=8192, method="full"), row(1.0))]
    population = [0.01**2, 0.3**2]
    agree = scale_weights([0.01, -0.02, 0.01], points, (0.0, 0.02**2), [1, 1, 1], population)
    scatter = scale_weights([0.4, -0.35, 0.05], points, (0.0, 0.02**2), [1, 1, 1], population)
    assert sum(agree) == pytest.approx(1.0) and sum(scatter) == pytest.approx(1.0)
    assert agree[0] > 0.9 and scatter[1] > 0.9


def test_the_band_far_from_corner_rows_returns_to_the_stacks_setting_error() -> None:
    """Three rows of one corner agreeing with the start: the factor is kept and the correction is off, yet far from
    the corner the band is that of a setting error the rows cannot rule out (issue 43: it was their noise alone)."""
    corner = [row(1.0, seq_len=512), row(1.02, seq_len=1024), row(0.98, seq_len=768, micro_batch_size=2)]
    stacks = [
        from_source(row(f, seq_len=s, method=m), name)
        for name, m, f, s in (
            ("tight", "lora", 1.0, 256),
            ("tight", "full", 1.02, 8192),
            ("tight", "qlora", 0.98, 2048),
            ("loose", "lora", 0.7, 256),
            ("loose", "full", 1.5, 8192),
            ("loose", "qlora", 1.0, 2048),
        )
    ]
    result = recalibrate(
        [r.case for r in corner],
        START,
        start_name="s",
        sources=[],
        with_seeds=False,
        name="x",
        seed_cases=[r.case for r in stacks],
    )
    correction = result.coefficients.local_time_correction
    assert correction is not None and result.coefficients.time_scale == START.time_scale
    assert correction.weights == [0.0, 0.0, 0.0]  # the mean: no correction, the start's predictions
    population = source_log_variances(stacks, START)
    far = row(1.0, seq_len=8192, method="full", micro_batch_size=4)
    near_band = time_band(log_correction(row_point(corner[0]), correction)[1])
    far_band = time_band(log_correction(row_point(far), correction)[1])
    assert near_band < far_band
    # far away: between the tight stack's setting error and the loose one's, never the rows' noise alone
    assert correction.noise_log_variance < far_variance(correction)
    assert min(population) < correction.local_log_variance < max(population)


def test_the_amplitude_prior_is_a_log_normal_fitted_to_the_stacks_and_reaches_between_and_beyond_them() -> None:
    population = [0.01**2, 0.2**2, 0.34**2]
    grid, prior = amplitude_prior(population)
    logs = [math.log(v) for v in population]
    centre = sum(logs) / 3
    spread = math.sqrt(sum((x - centre) ** 2 for x in logs) / 2)
    assert len(grid) == len(prior) == AMPLITUDE_GRID_POINTS
    assert math.log(grid[0]) == pytest.approx(centre - 3 * spread)
    assert math.log(grid[-1]) == pytest.approx(centre + 3 * spread)
    assert prior.index(max(prior)) == AMPLITUDE_GRID_POINTS // 2  # the density peaks at the stacks' log mean
    assert grid[-1] > max(population) and grid[0] < min(population)
    assert amplitude_prior([0.04]) == ([pytest.approx(0.04)], [1.0])  # one stack: its own value


def test_the_amplitude_posterior_is_the_prior_times_the_rows_likelihood() -> None:
    points = [row_point(r) for r in (row(1.0, seq_len=256), row(1.0, seq_len=8192, method="full"), row(1.0))]
    residuals, variances, counts = [0.3, -0.25, 0.05], (0.0, 0.02**2), [1, 1, 1]
    even = scale_weights(residuals, points, variances, counts, [0.01**2, 0.3**2])
    tilted = scale_weights(residuals, points, variances, counts, [0.01**2, 0.3**2], [3.0, 1.0])
    odds = (tilted[0] / tilted[1]) / (even[0] / even[1])
    assert odds == pytest.approx(3.0)


@pytest.mark.parametrize("stack_variance", [0.0, 0.15**2], ids=["factor-kept", "factor-fitted"])
def test_the_band_far_from_the_rows_is_the_amplitude_mixtures_central_80_percent(stack_variance: float) -> None:
    """The printed amplitude's far band equals the mixture's, each amplitude's far variance from the full posterior
    (g² + s² − g⁴ 1ᵀ Σ⁻¹ 1 + n², Σ the rows' joint covariance: ``time_correction.far_variance``)."""
    groups = replicate_groups([row(1.0, seq_len=512), row(1.3, seq_len=2048, method="full"), row(0.8, seq_len=256)])
    residuals, local, noise = [0.05, 0.25, -0.2], 0.2**2, 0.05**2
    population = [0.01**2, 0.1**2, 0.3**2]
    correction = local_correction(groups, residuals, (local, noise, stack_variance), 0.9, population)
    points, counts = [row_point(g.row) for g in groups], [g.count for g in groups]
    amplitudes, prior = amplitude_prior(population)
    weights = scale_weights(residuals, points, (stack_variance, noise), counts, amplitudes, prior)

    def far(s2: float) -> float:
        precision = inverse_spd([[stack_variance + v for v in line] for line in covariance(points, s2, noise, counts)])
        return stack_variance + s2 - stack_variance**2 * sum(map(sum, precision)) + noise

    target = mixture_quantile(weights, [far(s2) for s2 in amplitudes], BAND_SHARE)
    assert BAND_Z * math.sqrt(far_variance(correction)) == pytest.approx(target, rel=1e-6)
