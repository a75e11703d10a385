"""FP8 in the search (planner.fp8_choice): an unasked FP8 setting is kept only where ≥ 5 % faster than its twin."""

from __future__ import annotations

import pytest
from plan_requests import plan_request

from autotune.planner import fp8_choice
from autotune.planner.fp8_choice import FP8_MIN_GAIN, where_fp8_pays
from autotune.planner.search import evaluate_candidates, search


def test_every_fp8_candidate_kept_beats_its_bf16_twin_by_the_margin(monkeypatch: pytest.MonkeyPatch) -> None:
    """Llama-3-8B on an H100 with torchao installed: the kept FP8 settings are ≥ 5 % faster, the dropped ones are not;
    the plan is FP8."""
    monkeypatch.setattr(fp8_choice, "torchao_installed", lambda: True)
    request, _ = plan_request(model="llama3-8b", gpu="h100", seq_len=4096, method="lora", objective="speed")
    scored = evaluate_candidates(request)
    kept = where_fp8_pays(scored, request)
    twins = {s.setting: s.run_time_s for s in scored if not s.setting.fp8}
    fp8_kept = [s for s in kept if s.setting.fp8]
    assert fp8_kept
    for s in fp8_kept:
        assert s.run_time_s <= (1 - FP8_MIN_GAIN) * twins[s.setting.model_copy(update={"fp8": False})]
    for s in [s for s in scored if s.setting.fp8 and s not in kept]:
        assert s.run_time_s > (1 - FP8_MIN_GAIN) * twins[s.setting.model_copy(update={"fp8": False})]
    assert search(request).best.setting.fp8


def test_a_forced_choice_keeps_every_candidate() -> None:
    """--fp8 / --no-fp8: nothing is dropped, and --no-fp8 searches no FP8 setting."""
    on, _ = plan_request(model="qwen2.5-0.5b", gpu="h100", seq_len=512, fp8=True)
    assert all(s.setting.fp8 for s in where_fp8_pays(evaluate_candidates(on), on))
    assert search(on).best.setting.fp8
    off, _ = plan_request(model="llama3-8b", gpu="h100", seq_len=4096, fp8=False)
    assert not any(s.setting.fp8 for s in evaluate_candidates(off))


def test_without_torchao_fp8_is_not_offered_unasked(monkeypatch: pytest.MonkeyPatch) -> None:
    """The core cannot run FP8 without torchao (launch refuses the plan): unasked, no FP8 candidate is searched."""
    monkeypatch.setattr(fp8_choice, "torchao_installed", lambda: False)
    request, _ = plan_request(model="llama3-8b", gpu="h100", seq_len=4096, method="lora", objective="speed")
    assert not any(s.setting.fp8 for s in evaluate_candidates(request))
