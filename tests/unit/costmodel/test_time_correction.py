"""The local time correction's kernel, mean and variance (autotune.costmodel.time_correction)."""

from __future__ import annotations

import math

import pytest

from autotune.costmodel.time_correction import (
    BAND_Z,
    far_variance,
    kernel,
    log_correction,
    scaled_distance_sq,
    time_band,
)
from autotune.schemas.time_correction import LocalTimeCorrection, SettingPoint


def point(method: str = "lora", seq: float = 11.0, sharding: str = "none") -> SettingPoint:
    """A 1B-parameter point on one GPU at micro batch 1."""
    return SettingPoint(
        method=method, sharding=sharding, log2_seq_len=seq, log2_micro_batch=0, log2_params_b=0, log2_gpus=0
    )


def test_the_kernel_counts_doublings_and_a_method_apart_is_far() -> None:
    assert kernel(point(), point()) == 1.0
    assert kernel(point(seq=11), point(seq=13)) == pytest.approx(math.exp(-0.5))  # 4× the sequence: one length
    assert kernel(point(), point("qlora")) == pytest.approx(math.exp(-2))
    assert kernel(point(), point(sharding="fsdp")) == pytest.approx(math.exp(-0.5))
    assert scaled_distance_sq(point("full", 9), point("lora", 13)) == pytest.approx(4 + 4)


def one_row(residual: float, local: float = 0.09, noise: float = 0.01, stack: float = 0.0) -> LocalTimeCorrection:
    """The correction one row at :func:`point` with log residual ``residual`` gives (Σ a 1×1 matrix)."""
    return LocalTimeCorrection(
        anchors=[point()],
        row_ids=["a"],
        weights=[residual / (local + noise)],
        precision=[[1 / (stack + local + noise)]],
        local_log_variance=local,
        noise_log_variance=noise,
        stack_log_variance=stack,
    )


def test_the_correction_applies_at_the_row_and_fades_away_from_it() -> None:
    correction = one_row(0.5)
    at_row, at_row_variance = log_correction(point(), correction)
    assert at_row == pytest.approx(0.5 * 0.09 / 0.10)  # s² / (s² + n²) of the residual
    far, far_var = log_correction(point("full", seq=16), correction)
    assert abs(far) < 0.01 and far_var == pytest.approx(far_variance(correction), rel=0.01)
    assert at_row_variance == pytest.approx(0.09 - 0.09**2 / 0.10 + 0.01)
    assert far_variance(correction) == pytest.approx(0.10)  # the prior: s² + n²
    assert time_band(at_row_variance) < time_band(far_var)
    assert time_band(0.04) == pytest.approx(math.expm1(BAND_Z * 0.2))


def test_a_fitted_stack_factor_is_uncertain_far_away_but_not_at_the_row() -> None:
    kept, moved = one_row(0.0), one_row(0.0, stack=1.0)
    assert log_correction(point(), moved)[1] == pytest.approx(log_correction(point(), kept)[1], abs=0.01)
    assert far_variance(moved) > far_variance(kept) + 0.05


def test_a_hand_edited_correction_cannot_send_a_time_past_the_stack_factors_range() -> None:
    wild = one_row(0.5).model_copy(update={"weights": [1e300]})
    assert log_correction(point(), wild)[0] == pytest.approx(math.log(10))
    assert log_correction(point(), wild.model_copy(update={"weights": [-1e300]}))[0] == pytest.approx(math.log(0.1))
