"""The GPU type × count grid: row quantities, the choice by time vs cost under a deadline / budget, durations."""

from __future__ import annotations

import pytest
from plan_requests import plan_request

from autotune.errors import InfeasibleError, InvalidRequestError
from autotune.planner.grid import (
    GridRow,
    choose_row,
    format_duration,
    parse_duration_s,
    plan_row,
    setting_objective,
    within_limits,
)

WORKLOAD = {"model": "llama3-8b", "num_samples": 50000, "epochs": 2.0, "objective": "speed"}
PRICES = {"rtx-4090": 0.54, "h100-80gb": 3.67}


def row(gpu: str, count: int, price: float | None = None) -> GridRow:
    request, _ = plan_request(gpu=gpu, num_gpus=count, **WORKLOAD)
    return plan_row(request.cluster.gpu.key, count, 1, price, request)


@pytest.fixture(scope="module")
def rows() -> list[GridRow]:
    return [row("4090", 1, PRICES["rtx-4090"]), row("h100", 8, PRICES["h100-80gb"])]


def test_row_quantities_follow_from_the_chosen_setting(rows: list[GridRow]) -> None:
    for r in rows:
        assert r.fits and r.result is not None and r.run_time_s is not None
        estimate = r.result.best.estimate
        assert r.run_time_s == estimate.total_time_s
        assert r.gpu_hours == pytest.approx(r.world_size * r.run_time_s / 3600)
        assert r.cost == pytest.approx(r.gpu_hours * r.price_per_gpu_hour)
        per_million = r.price_per_gpu_hour * r.world_size / 3600 / estimate.tokens_per_s * 1e6
        assert r.cost_per_million_tokens == pytest.approx(per_million)


def test_time_and_cost_choose_differently(rows: list[GridRow]) -> None:
    cheap, fast = rows
    assert cheap.cost < fast.cost and fast.run_time_s < cheap.run_time_s  # the premise of the case
    assert choose_row(rows, "cost") is cheap
    assert choose_row(rows, "time") is fast
    assert choose_row(rows, "speed") is fast


def test_a_deadline_the_cheapest_misses_moves_cost_to_a_row_that_meets_it(rows: list[GridRow]) -> None:
    cheap, fast = rows
    deadline = (cheap.run_time_s + fast.run_time_s) / 2
    assert not within_limits(cheap, deadline, None) and within_limits(fast, deadline, None)
    assert choose_row(rows, "cost", deadline_s=deadline) is fast


def test_a_budget_the_fastest_exceeds_moves_time_to_a_row_within_it(rows: list[GridRow]) -> None:
    cheap, fast = rows
    budget = (cheap.cost + fast.cost) / 2
    assert choose_row(rows, "time", budget=budget) is cheap


def test_no_row_meets_the_deadline_names_the_fastest_and_its_time(rows: list[GridRow]) -> None:
    fast = rows[1]
    with pytest.raises(InfeasibleError, match="no row meets --deadline 1 min") as error:
        choose_row(rows, "cost", deadline_s=60)
    assert f"the fastest is 8× h100-80gb at {format_duration(fast.run_time_s)}" in str(error.value)


def test_no_row_meets_the_budget_names_the_cheapest_and_its_cost(rows: list[GridRow]) -> None:
    with pytest.raises(InfeasibleError, match=r"no row meets --budget 0\.5 USD: the cheapest is 1× rtx-4090 at"):
        choose_row(rows, "time", budget=0.5)


def test_a_row_without_price_has_time_but_no_cost_and_cost_cannot_choose_it() -> None:
    unpriced = row("h100", 1)
    assert unpriced.run_time_s is not None and unpriced.cost is None and unpriced.cost_per_million_tokens is None
    assert choose_row([unpriced], "time") is unpriced
    with pytest.raises(InfeasibleError, match="no fitting row has a price"):
        choose_row([unpriced], "cost")
    with pytest.raises(InfeasibleError, match="has a price"):
        choose_row([unpriced], "time", budget=100)


def test_a_cell_where_nothing_fits_stays_a_row_with_the_reason() -> None:
    request, _ = plan_request(model="llama3-8b", gpu="4090", method="full", **{"objective": "speed"})
    failed = plan_row("rtx-4090", 1, 1, 0.54, request)
    assert not failed.fits and failed.error is not None and "nothing fits on 1× rtx-4090" in failed.error
    assert failed.cost is None and failed.gpu_hours is None
    refused = plan_row("rtx-4090", 3, 1, 0.54, InvalidRequestError("--global-batch-size 32 is not a multiple"))
    assert refused.error == "--global-batch-size 32 is not a multiple"
    with pytest.raises(InfeasibleError, match="nothing fits on any GPU type × count: 1× rtx-4090: nothing fits"):
        choose_row([failed], "time")


def test_time_and_cost_choose_the_setting_by_speed() -> None:
    assert setting_objective("time") == setting_objective("cost") == "speed"
    assert [setting_objective(o) for o in ("quality", "speed", "memory")] == ["quality", "speed", "memory"]


@pytest.mark.parametrize(
    ("text", "seconds"), [("12h", 43200), ("90m", 5400), ("2d", 172800), ("30s", 30), ("1.5H", 5400)]
)
def test_durations_parse_with_their_unit(text: str, seconds: float) -> None:
    assert parse_duration_s(text) == seconds


@pytest.mark.parametrize("text", ["12", "12x", "h", "-3h", "0h", "nanh", "infh", "12 hours"])
def test_a_duration_without_a_known_unit_or_positive_number_is_refused(text: str) -> None:
    with pytest.raises(InvalidRequestError, match="--deadline"):
        parse_duration_s(text)
