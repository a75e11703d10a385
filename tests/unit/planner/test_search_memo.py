"""A process searches each request once (``planner.search_memo``): the outcome again, a refusal raised again."""

from __future__ import annotations

import importlib

import pytest
from plan_requests import plan_request

from autotune.errors import InfeasibleError
from autotune.planner import search, search_memo
from autotune.planner.sweep import plan_cell

search_module = importlib.import_module("autotune.planner.search")  # the package exports the function as search


@pytest.fixture
def evaluations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The requests whose candidates were estimated, in order (the patch itself forgets remembered searches)."""
    seen: list[str] = []
    evaluate = search_module.evaluate_candidates
    monkeypatch.setattr(
        search_module,
        "evaluate_candidates",
        lambda request: seen.append(request.model_dump_json()) or evaluate(request),
    )
    return seen


def test_a_request_searched_again_gets_the_first_outcome(evaluations: list[str]) -> None:
    request, _ = plan_request(model="llama3-8b", gpu="4090", seq_len=2048)
    first = search(request)
    again = search(request.model_copy())
    assert again is first and len(evaluations) == 1
    other, _ = plan_request(model="llama3-8b", gpu="4090", seq_len=1024)
    assert search(other).best.estimate != first.best.estimate and len(evaluations) == 2


def test_a_refusal_is_raised_again_with_its_message(evaluations: list[str]) -> None:
    request, _ = plan_request(model="llama3-70b", gpu="4090", seq_len=2048, method="full", global_batch_size=32)
    with pytest.raises(InfeasibleError) as first:
        search(request)
    searched = len(evaluations)
    with pytest.raises(InfeasibleError) as again:
        search(request)
    assert str(again.value) == str(first.value) and again.value is not first.value
    assert len(evaluations) == searched
    with pytest.raises(InfeasibleError, match=r"^nothing fits$"):  # explain=False is another search: no message
        search(request, explain=False)
    assert len(evaluations) == searched + 1


def test_only_the_newest_outcomes_are_kept(evaluations: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(search_memo, "MAX_SEARCHES", 2)
    requests = [plan_request(model="qwen2.5-0.5b", gpu="4090", seq_len=n)[0] for n in (512, 1024, 2048)]
    for request in requests:
        search(request)
    search(requests[2])
    search(requests[1])
    assert len(evaluations) == 3  # the two newest are remembered
    search(requests[0])
    assert len(evaluations) == 4  # the oldest was dropped


def test_a_patch_of_the_cost_model_forgets_what_was_searched(
    evaluations: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    request, _ = plan_request(model="qwen2.5-0.5b", gpu="4090", seq_len=512)
    assert search(request).best.setting.compile  # compiling pays over the default 1000 steps
    monkeypatch.setattr("autotune.costmodel.estimate.COMPILE_FIXED_S", 1e6)  # compile takes 11 days
    assert not search(request).best.setting.compile
    assert len(evaluations) == 2


@pytest.fixture
def estimations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The requests whose candidates were actually estimated (not answered from ``search_memo``), in order."""
    seen: list[str] = []
    evaluate = search_module._evaluate
    monkeypatch.setattr(
        search_module, "_evaluate", lambda request: seen.append(request.model_dump_json()) or evaluate(request)
    )
    return seen


def test_a_refused_sweep_cell_estimates_its_candidates_once(estimations: list[str]) -> None:
    # the cell's search estimates them and refuses; the cell then names the closest of the same candidates
    request, _ = plan_request(model="llama3-70b", gpu="4090", seq_len=2048, method="full", global_batch_size=32)
    cell = plan_cell(request, "full")
    assert cell.status == "infeasible" and cell.closest_setting is not None and cell.closest_need_gib is not None
    asked = request.model_copy(update={"global_batch_stated": True}).model_dump_json()
    assert estimations.count(asked) == 1
    again = search_module.evaluate_candidates(request.model_copy(update={"global_batch_stated": True}))
    assert cell.closest_setting in {s.setting for s in again}


def test_only_the_newest_estimated_lists_are_kept(estimations: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(search_memo, "MAX_EVALUATIONS", 1)
    first, second = (plan_request(model="qwen2.5-0.5b", gpu="4090", seq_len=n)[0] for n in (512, 1024))
    evaluate = search_module.evaluate_candidates
    assert evaluate(first) is evaluate(first) and len(estimations) == 1  # the same tuple, estimated once
    evaluate(second)
    evaluate(first)
    assert len(estimations) == 3  # the first was dropped for the second
