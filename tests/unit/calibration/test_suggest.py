"""Which settings to measure first: greedy variance reduction over the plan space (autotune.calibration.suggest)."""

from __future__ import annotations

import pytest

from autotune.calibration.suggest import Variances, greedy_variance_reduction
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
