"""Which settings to measure first: greedy variance reduction over the plan space (autotune.calibration.suggest)."""

from __future__ import annotations

import math

import pytest
from time_rows import START, from_source, row

from autotune.calibration import stack_fit
from autotune.calibration.coverage import amplitude_prior, local_log_variance, source_log_variances
from autotune.calibration.suggest import Variances, greedy_variance_reduction
from autotune.calibration.time_fit import TimeRow
from autotune.costmodel.time_correction import BAND_Z, kernel, time_band
from autotune.schemas.time_correction import SettingPoint


def point(method: str = "lora", seq: float = 11.0, batch: float = 0.0) -> SettingPoint:
    """A Llama-1B-sized point on one GPU (log₂ seq ``seq``, log₂ micro batch ``batch``)."""
    return SettingPoint(
        method=method, sharding="none", log2_seq_len=seq, log2_micro_batch=batch, log2_params_b=0.0, log2_gpus=0.0
    )


VARIANCES = Variances(stack=1.0, local=0.09, noise=0.01)


def test_the_second_pick_goes_to_the_corner_the_first_says_least_about() -> None:
    """Four LoRA settings around seq 2048 and one QLoRA setting: after a LoRA row, the QLoRA row, not a fifth LoRA."""
    space = [point(seq=11.0), point(seq=11.2), point(seq=10.8), point(seq=11.0, batch=0.5), point("qlora", seq=11.0)]
    selection = greedy_variance_reduction(space, 2, VARIANCES)
    first, second = (space[i] for i in selection.chosen)
    assert first.method == "lora"  # the most typical setting measures the stack factor for all
    assert second.method == "qlora"
    # every pick lowers the mean predicted variance over the space
    assert selection.mean_variance[0] > selection.mean_variance[1] > selection.mean_variance[2]
    assert selection.mean_band(2) < selection.mean_band(0)


def test_picks_never_repeat_and_stop_at_the_space() -> None:
    space = [point(seq=9.0), point(seq=13.0)]
    selection = greedy_variance_reduction(space, 5, VARIANCES)
    assert sorted(selection.chosen) == [0, 1]
    with pytest.raises(ValueError, match="k ≥ 1"):
        greedy_variance_reduction(space, 0, VARIANCES)


def stack(name: str, factors: tuple[float, ...]) -> list[TimeRow]:
    """One stack's rows of the start: ``factors`` × the start's prediction at three sequence lengths."""
    return [from_source(row(f, seq_len=s), name) for f, s in zip(factors, (256, 1024, 4096), strict=True)]


def test_the_prior_setting_error_is_the_band_calibrate_prints_before_any_row() -> None:
    """s² is the amplitude whose normal 80 % band holds 80 % of the prior mixture over the stacks' setting errors
    (what calibrate's band is before rows weigh it), not the start's 'default' time band."""
    rows = [*stack("tight", (0.95, 1.0, 1.05)), *stack("loose", (0.6, 1.0, 1.6))]
    variances = Variances.of(START, rows)
    assert (variances.stack, variances.noise) == (stack_fit.STACK_LOG_SIGMA**2, stack_fit.ROW_LOG_SIGMA**2)
    grid, prior = amplitude_prior(source_log_variances(rows, START))
    half_width = BAND_Z * math.sqrt(variances.stack + variances.local + variances.noise)
    inside = sum(
        p * math.erf(half_width / math.sqrt(2 * (variances.stack + s2 + variances.noise)))
        for s2, p in zip(grid, prior, strict=True)
    ) / sum(prior)
    assert inside == pytest.approx(0.8, abs=1e-6)
    assert variances.local != pytest.approx(local_log_variance(START), rel=0.01)
    # a population of looser stacks gives a wider prior
    looser = Variances.of(START, [*stack("tight", (0.9, 1.0, 1.1)), *stack("loose", (0.5, 1.0, 2.0))])
    assert looser.local > variances.local


def test_without_stacks_of_enough_rows_the_prior_is_the_starts_own_setting_error() -> None:
    """As the band does: no source with three rows, no population, the start's s²."""
    rows = [from_source(row(1.2), "one"), from_source(row(0.8, seq_len=512), "other")]
    assert Variances.of(START, rows).local == pytest.approx(local_log_variance(START))


def test_the_band_after_k_rows_conditions_each_amplitude_so_it_is_narrower_than_the_matched_one() -> None:
    """Before any row the mixture's band is the matched amplitude's (matched there); after K picks each amplitude of
    the prior grid is conditioned on its own, and the mixture's band is narrower than the one matched amplitude's
    conditioned on the same picks: the tight stacks' small amplitudes no longer hide under the stack factor."""
    variances = Variances.of(START, [*stack("tight", (0.97, 1.0, 1.03)), *stack("loose", (0.5, 1.0, 2.0))])
    assert len(variances.amplitudes) > 1
    space = [point(seq=s, batch=b) for s in (9.0, 11.0, 13.0) for b in (0.0, 2.0)] + [point("full", seq=11.0)]
    selection = greedy_variance_reduction(space, 3, variances)
    assert selection.mean_band(0) == pytest.approx(time_band(selection.mean_variance[0]), rel=1e-6)
    single = Variances(variances.stack, variances.local, variances.noise)  # the matched amplitude alone
    matched = greedy_variance_reduction(space, 3, single)
    assert matched.chosen == selection.chosen  # the picks follow the matched amplitude either way
    assert selection.mean_band(3) < matched.mean_band(3) < matched.mean_band(0)


def test_with_one_amplitude_the_band_is_the_mean_of_each_settings_normal_band() -> None:
    """One amplitude: the mixture is one normal, and each setting's band is time_band of its posterior variance."""
    space = [point(seq=9.0), point(seq=13.0), point("qlora", seq=11.0)]
    selection = greedy_variance_reduction(space, 1, VARIANCES)
    pick = space[selection.chosen[0]]
    prior = VARIANCES.stack + VARIANCES.local + VARIANCES.noise
    variances = [
        prior - (VARIANCES.stack + VARIANCES.local * kernel(p, pick)) ** 2 / prior for p in space
    ]  # conditioning on one measured point (R&W eq. 2.26)
    expected = sum(time_band(v) for v in variances) / len(space)
    # rel 1e-4: time_band's BAND_Z is Φ⁻¹(0.9) to 4 decimals, the mixture's quantile is exact
    assert selection.mean_band(1) == pytest.approx(expected, rel=1e-4)
    assert selection.mean_band(0) == pytest.approx(time_band(prior), rel=1e-4)
