"""autotune.calibration.ranking: ranks and Spearman's rho."""

from __future__ import annotations

import pytest

from autotune.calibration.ranking import ranks, spearman


def test_spearman_known_values_and_ties() -> None:
    assert ranks([10.0, 30.0, 20.0, 20.0]) == [1.0, 4.0, 2.5, 2.5]
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 2, 3], [5, 5, 5]) is None
    with pytest.raises(ValueError):
        spearman([1, 2], [1])
