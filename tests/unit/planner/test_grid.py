"""The GPU type × count grid: row quantities, the choice by time vs cost under a deadline / budget, durations."""

from __future__ import annotations

import pytest
from plan_requests import plan_request

from autotune.errors import InfeasibleError, InvalidRequestError
from autotune.planner.grid import (
    GridRow,
    break_tie,
    choose,
    choose_row,
    format_duration,
    method_note,
    parse_duration_s,
    plan_row,
    row_span,
    setting_objective,
    within_limits,
)

WORKLOAD = {"model": "llama3-8b", "num_samples": 50000, "epochs": 2.0, "objective": "speed"}
PRICES = {"rtx-4090": 0.54, "h100-80gb": 3.67}
FAST_PRICE = 30.0
"""A price for 8× H100 that puts its cost range clear of the 4090's (no tie): time and cost then disagree."""


def row(gpu: str, count: int, price: float | None = None) -> GridRow:
    request, _ = plan_request(gpu=gpu, num_gpus=count, **WORKLOAD)
    return plan_row(request.cluster.gpu.key, count, 1, price, request)


@pytest.fixture(scope="module")
def rows() -> list[GridRow]:
    return [row("4090", 1, PRICES["rtx-4090"]), row("h100", 8, FAST_PRICE)]


def overlap(a: GridRow, b: GridRow, objective: str) -> bool:
    (a_low, a_high), (b_low, b_high) = row_span(a, objective), row_span(b, objective)  # type: ignore[arg-type]
    return a_low <= b_high and b_low <= a_high


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
    assert not overlap(cheap, fast, "cost") and not overlap(cheap, fast, "time")  # and no tie
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
    request, _ = plan_request(model="llama3-8b", gpu="4090", method="full", objective="speed")
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


def test_a_row_spans_its_value_divided_and_multiplied_by_one_plus_its_time_band(rows: list[GridRow]) -> None:
    for r in rows:
        assert r.result is not None and r.cost is not None and r.run_time_s is not None
        band = r.result.best.estimate.time_uncertainty_fraction
        assert band > 0
        assert row_span(r, "cost") == pytest.approx((r.cost / (1 + band), r.cost * (1 + band)))
        assert row_span(r, "time") == pytest.approx((r.run_time_s / (1 + band), r.run_time_s * (1 + band)))
        assert row_span(r, "cost")[0] > 0  # a band past 100 % (extrapolated) never spans a cost of 0


def test_overlapping_costs_are_a_tie_that_goes_to_the_faster_row() -> None:
    cheap, dear = row("4090", 1, PRICES["rtx-4090"]), row("h100", 1, PRICES["h100-80gb"])
    assert cheap.cost < dear.cost and dear.run_time_s < cheap.run_time_s and overlap(cheap, dear, "cost")
    tie = choose([cheap, dear], "cost")
    assert tie.leader is cheap and tie.chosen is dear and tie.broken
    line = tie.line()
    assert line.startswith("tie: the cost ranges overlap") and "cost ties go to the faster row" in line
    assert f"{dear.label} instead of {cheap.label}" in line
    assert choose_row([cheap, dear], "cost") is dear


def test_overlapping_times_are_a_tie_that_goes_to_the_cheaper_row() -> None:
    slow_cheap, fast_dear = row("h100", 1, 1.0), row("h200", 1, 50.0)
    assert fast_dear.run_time_s < slow_cheap.run_time_s and overlap(slow_cheap, fast_dear, "time")
    tie = break_tie([slow_cheap, fast_dear], "time")
    assert tie.leader is fast_dear and tie.chosen is slow_cheap
    assert "time ties go to the cheaper row" in tie.line()


def test_a_tie_never_takes_a_row_outside_the_limits() -> None:
    cheap, dear = row("4090", 1, PRICES["rtx-4090"]), row("h100", 1, PRICES["h100-80gb"])
    budget = (cheap.cost + dear.cost) / 2  # the faster row is over it
    assert choose_row([cheap, dear], "cost", budget=budget) is cheap


def test_quality_memory_and_speed_are_not_banded(rows: list[GridRow]) -> None:
    for objective in ("quality", "memory", "speed"):
        assert not break_tie(rows, objective).broken  # type: ignore[arg-type]


def test_a_lower_quality_method_chosen_without_method_is_named_with_its_note() -> None:
    cheap, dear = row("4090", 1, PRICES["rtx-4090"]), row("h100", 1, PRICES["h100-80gb"])
    assert cheap.result is not None and dear.result is not None
    assert cheap.result.best.setting.method == "qlora" and dear.result.best.setting.method != "qlora"
    note = method_note(cheap, [cheap, dear], "cost", method_given=False)
    assert note is not None and note.startswith("method: qlora was chosen for cost") and "NF4" in note
    assert method_note(cheap, [cheap, dear], "cost", method_given=True) is None
