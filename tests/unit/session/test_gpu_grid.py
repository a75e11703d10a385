"""The table of GPU types × counts in the session layer: its options are validated before any cell is planned."""

from __future__ import annotations

import pytest

from autotune.errors import InvalidRequestError, UnknownNameError
from autotune.profiles.catalog import current_gpus
from autotune.session.gpu_grid import MAX_CELLS, grid_ask, parse_count_list, parse_gpu_list
from autotune.session.option_groups import GridOptions
from autotune.session.planning import PlanOptions


def test_counts_parse_in_order_without_duplicates() -> None:
    assert parse_count_list("1, 2,8,2") == [1, 2, 8]
    for bad in ("1,x", "0", "65", "1,,2"):
        with pytest.raises(InvalidRequestError, match="--num-gpus"):
            parse_count_list(bad)


def test_gpus_resolve_to_catalog_keys_and_any_is_the_current_cards() -> None:
    assert parse_gpu_list("4090, h100,rtx-4090") == ["rtx-4090", "h100-80gb"]
    assert parse_gpu_list(" ANY ") == [spec.key for spec in current_gpus()]
    with pytest.raises(InvalidRequestError, match="give GPU names"):
        parse_gpu_list(" , ")
    with pytest.raises(UnknownNameError):
        parse_gpu_list("4090,not-a-gpu")


@pytest.mark.parametrize(
    ("options", "counts", "table", "words"),
    [
        ({"objective": "fastest"}, "1", GridOptions(), "--objective 'fastest'"),
        ({}, "1", GridOptions(deadline="12h"), "need the run's size"),
        ({"num_samples": 1000}, "1", GridOptions(budget=-5.0), "--budget -5"),
        ({"num_samples": 1000}, "1", GridOptions(deadline="12 parsecs"), "--deadline"),
        ({}, ",".join(str(n) for n in range(1, 65)), GridOptions(), f"at most {MAX_CELLS} cells"),
    ],
)
def test_bad_table_options_are_refused_in_one_line(
    options: dict[str, object], counts: str, table: GridOptions, words: str
) -> None:
    base = PlanOptions(model="llama3-8b", gpu="4090,h100,a100-80gb,l40s,a10g", **options)
    with pytest.raises(InvalidRequestError) as error:
        grid_ask(base, counts, table)
    assert words in str(error.value) and "\n" not in str(error.value)


def test_the_ask_carries_the_limits_in_seconds_and_the_prices_given() -> None:
    base = PlanOptions(model="llama3-8b", gpu="h100,4090", num_samples=1000, objective="cost")
    ask = grid_ask(base, "8,1", GridOptions(deadline="2h", budget=50.0, price=["h100=2.5"]))
    assert (ask.gpus, ask.counts, ask.objective) == (["h100-80gb", "rtx-4090"], [8, 1], "cost")
    assert (ask.deadline_s, ask.budget) == (7200.0, 50.0)
    assert ask.prices.price("h100-80gb") == 2.5
