"""Best-fit-decreasing packing: whole items, bins within capacity, the best fit chosen, deterministic."""

from __future__ import annotations

import random

import pytest

from autotune.schemas.packing import PACKED_LAYOUTS, best_fit_decreasing, packed_layout, packing_efficiency


def _skewed_lengths(count: int, capacity: int, seed: int) -> list[int]:
    """Long-tailed lengths (log-normal, as instruction data is), clipped to 1..capacity."""
    rng = random.Random(seed)
    return [min(capacity, max(1, round(rng.lognormvariate(4.0, 1.0)))) for _ in range(count)]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_item_lies_whole_in_exactly_one_bin_within_capacity(seed: int) -> None:
    capacity = 512
    lengths = _skewed_lengths(3000, capacity, seed)
    bins = best_fit_decreasing(lengths, capacity)
    placed = sorted(i for members in bins for i in members)
    assert placed == list(range(len(lengths)))
    assert all(sum(lengths[i] for i in members) <= capacity for members in bins)
    assert all(members == sorted(members) and members for members in bins)
    lower_bound = -(-sum(lengths) // capacity)
    assert len(bins) <= 11 / 9 * lower_bound + 4  # Johnson's bound holds against the volume bound too


def test_each_item_goes_to_the_fullest_bin_it_fits() -> None:
    # decreasing: 6 → bin 0 (free 4), 5 → bin 1 (free 5), 4 → bin 0 (free 4 fits exactly, best fit),
    # 3 → bin 1 (free 5; bin 0 is full), 2 → bin 1 (free 2), 1 → bin 2
    assert best_fit_decreasing([1, 2, 3, 4, 5, 6], 10) == [[3, 5], [1, 2, 4], [0]]


def test_best_fit_is_not_first_fit() -> None:
    # 7 → bin 0 (free 3), 4 and 4 → bin 1 (free 2); 1 fits both: first fit takes bin 0, best fit bin 1
    assert best_fit_decreasing([7, 4, 4, 1], 10) == [[0], [1, 2, 3]]


def test_ties_are_broken_by_index_and_by_bin_age() -> None:
    assert best_fit_decreasing([4, 4, 4, 4], 8) == [[0, 1], [2, 3]]
    lengths = _skewed_lengths(500, 256, seed=7)
    assert best_fit_decreasing(lengths, 256) == best_fit_decreasing(list(lengths), 256)


def test_bad_input_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="capacity"):
        best_fit_decreasing([1], 0)
    with pytest.raises(ValueError, match="item 1 has length 9"):
        best_fit_decreasing([1, 9], 8)
    with pytest.raises(ValueError, match="item 0 has length 0"):
        best_fit_decreasing([0], 8)
    assert best_fit_decreasing([], 8) == []


def test_efficiency_is_real_tokens_over_block_capacity() -> None:
    lengths = [1, 2, 3, 4, 5, 6]
    bins = best_fit_decreasing(lengths, 10)
    assert packing_efficiency(lengths, bins, 10) == pytest.approx(21 / 30)
    assert packing_efficiency([], [], 10) == 1.0


def test_only_the_implementations_that_mask_packed_sequences_pack() -> None:
    assert packed_layout("flash_attention_2") == "flattened"
    assert packed_layout("sdpa") == packed_layout("eager") == "row-per-block"
    assert packed_layout("eager-legacy") is None and packed_layout("flash-triton") is None
    assert set(PACKED_LAYOUTS) == {"flash_attention_2", "sdpa", "eager"}
