"""Padded batches of a dataset: the tokens a micro batch is padded to, and memory's longest (schemas.workload)."""

from __future__ import annotations

import random

import pytest
from pydantic import ValidationError

from autotune.schemas.dataset_stats import length_bins
from autotune.schemas.workload import PaddedBatches, PaddedLengths, Workload, expected_longest


def test_expected_longest_is_the_mean_of_the_maximum() -> None:
    # two lengths, 1 and 3, equally likely: the longer of two draws is 3 unless both are 1 (1 in 4)
    assert expected_longest((1, 3), 2) == pytest.approx(0.25 * 1 + 0.75 * 3)
    assert expected_longest((1, 3), 1) == pytest.approx(2.0)
    assert expected_longest((5, 5, 5), 7) == pytest.approx(5.0)
    lengths = (1, 2, 4, 8, 16)
    values = [expected_longest(lengths, b) for b in (1, 2, 4, 8, 64)]
    assert values == sorted(values) and values[-1] == pytest.approx(16, rel=1e-3)


@pytest.mark.parametrize(("seed", "mu", "sigma"), [(0, 4.5, 1.0), (1, 5.5, 0.6), (2, 3.0, 1.5)])
def test_the_200_length_bins_price_a_padded_micro_batch_within_4_percent(seed: int, mu: float, sigma: float) -> None:
    """Log-normal lengths (instruction data's long tail), truncated at 2048: E[longest of b] from the bins is within
    4 % of the exact one from all 5,000 lengths, for micro batches 1…32 (dataset_stats.LENGTH_BINS)."""
    rng = random.Random(seed)
    lengths = tuple(sorted(min(2048, max(1, int(rng.lognormvariate(mu, sigma)))) for _ in range(5000)))
    bins = tuple(length_bins(lengths))
    assert len(bins) == 200
    for micro_batch in (1, 2, 4, 8, 16, 32):
        exact = expected_longest(lengths, micro_batch)
        assert expected_longest(bins, micro_batch) == pytest.approx(exact, rel=0.04)


def test_a_padded_workload_computes_more_tokens_than_it_learns_from_and_peaks_at_its_longest() -> None:
    lengths = PaddedLengths(quantiles=(10, 20, 40, 90), longest_tokens=300)
    padded = Workload(seq_len=512, num_samples=100, batches=PaddedBatches(tokens_per_sample=40.0, lengths=lengths))
    assert padded.tokens_per_sequence == 40.0  # real tokens (tokens/s counts these)
    assert padded.computed_tokens_per_sequence(1) == 40.0  # one row: no padding (at least the mean)
    assert padded.computed_tokens_per_sequence(4) == pytest.approx(expected_longest((10, 20, 40, 90), 4))
    assert padded.computed_tokens_per_sequence(4) > padded.computed_tokens_per_sequence(2) > 40.0
    assert padded.peak_tokens_per_sequence == 300.0
    filled = Workload(seq_len=512)
    assert filled.computed_tokens_per_sequence(8) == filled.peak_tokens_per_sequence == 512.0
    mean_only = Workload(seq_len=512, batches=PaddedBatches(tokens_per_sample=40.0))  # a measurement's mean length
    assert mean_only.computed_tokens_per_sequence(8) == mean_only.peak_tokens_per_sequence == 40.0


@pytest.mark.parametrize(
    ("lengths", "expected"),
    [
        ({"quantiles": (20, 10), "longest_tokens": 20}, "ascend"),  # not sorted
        ({"quantiles": (0, 10), "longest_tokens": 20}, "ascend"),  # an empty example
        ({"quantiles": (10, 20), "longest_tokens": 15}, "ascend"),  # longest below the last quantile
        ({"quantiles": (), "longest_tokens": 15}, "at least 1 item"),
        ({"quantiles": (10, 20)}, "longest_tokens"),  # no longest
        ({"quantiles": (10, 600), "longest_tokens": 600}, "at most seq_len"),
    ],
)
def test_an_inconsistent_padded_workload_is_refused(lengths: dict[str, object], expected: str) -> None:
    batches = {"kind": "padded", "tokens_per_sample": 15.0, "lengths": lengths}
    with pytest.raises(ValidationError, match=expected):
        Workload.model_validate({"seq_len": 512, "batches": batches})


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"padded_length_quantiles": (10, 20), "padded_longest_tokens": 20}, "needs tokens_per_sample"),
        ({"tokens_per_sample": 15.0, "padded_length_quantiles": (20, 10), "padded_longest_tokens": 20}, "ascend"),
        ({"tokens_per_sample": 15.0, "padded_length_quantiles": (10, 600), "padded_longest_tokens": 600}, "seq_len"),
        ({"tokens_per_sample": 15.0, "padded_length_quantiles": (10, 20)}, "longest_tokens"),
        ({"tokens_per_sample": 15.0, "packed_attention_span_tokens": 9.0}, "packed \\(not padded\\)"),
    ],
)
def test_inconsistent_flat_fields_of_an_older_file_are_refused(fields: dict[str, object], expected: str) -> None:
    """The flat fields of plan schema 2 (``Workload._from_flat_fields``) are checked as the nested ones are."""
    with pytest.raises(ValidationError, match=expected):
        Workload.model_validate({"seq_len": 512, **fields})
