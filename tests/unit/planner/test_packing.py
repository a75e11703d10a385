"""The packing choice: the layout whose whole run is faster (autotune.planner.packing)."""

from __future__ import annotations

import pytest

from autotune.errors import InfeasibleError
from autotune.planner.packing import choose_packing


def test_the_faster_whole_run_wins_and_packed_wins_a_tie() -> None:
    assert choose_packing({"packed": 120.0, "padded": 480.0}) == "packed"
    assert choose_packing({"packed": 500.0, "padded": 480.0}) == "padded"
    assert choose_packing({"padded": 100.0, "packed": 100.0}) == "packed"


def test_a_layout_that_does_not_fit_is_not_chosen() -> None:
    assert choose_packing({"packed": None, "padded": 480.0}) == "padded"
    with pytest.raises(InfeasibleError):
        choose_packing({"packed": None, "padded": None})
