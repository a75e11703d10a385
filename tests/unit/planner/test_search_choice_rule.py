"""One choice rule (issue 19, item 2): the chosen setting, the runner-ups, forced ``--method/--sharding``,
``autotune sweep`` and ``plan --verify``'s re-plan all come from ``planner.search.choice_key``, and each runner-up
says why it lost."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from cli_runner import run as run_cli
from plan_requests import plan_request

from autotune.cli.plan_verify import VerifiedSetting, replan
from autotune.planner.search import (
    TIE_TOLERANCE,
    PlanResult,
    adjusted_run_time_s,
    choice_key,
    complexity,
    search,
)
from autotune.planner.sweep import sweep


def plan(**options: object) -> PlanResult:
    request, _ = plan_request(**options)
    return search(request)


def forced_best(method: str, sharding: str, **options: object):
    return plan(method=method, sharding=sharding, **options).best


REQUESTS = [
    {"model": "llama3-8b", "gpu": "4090"},
    {"model": "llama3-8b", "gpu": "4090", "seq_len": 8192},
    {"model": "llama3-8b", "gpu": "3090", "seq_len": 512},
    {"model": "qwen2.5-7b", "gpu": "4090", "objective": "speed"},
    {"model": "llama3-8b", "gpu": "l40s", "seq_len": 8192, "num_gpus": 8, "global_batch_size": 64},
]


@pytest.mark.parametrize("options", REQUESTS, ids=lambda o: " ".join(str(v) for v in o.values()))
def test_each_runner_up_is_what_forcing_its_method_and_sharding_chooses(options: dict[str, object]) -> None:
    # Issue 19: the 4090 plan's qlora runner-up (mbs 4 × ga 8, adamw-8bit) was not what
    # --method qlora --sharding none chose (mbs 2 × ga 16, adamw): the runner-ups were the fastest of each family.
    result = plan(**options)
    assert result.alternatives
    chosen = result.best.setting
    assert forced_best(chosen.method, chosen.sharding, **options).setting == chosen
    for alternative in result.alternatives:
        s = alternative.setting
        assert forced_best(s.method, s.sharding, **options).setting == s, s.short()


def test_the_issue_4090_qlora_runner_up_matches_the_forced_plan() -> None:
    result = plan(model="llama3-8b", gpu="4090")
    qlora_none = [a for a in result.alternatives if (a.setting.method, a.setting.sharding) == ("qlora", "none")]
    assert len(qlora_none) == 1
    assert qlora_none[0].setting == forced_best("qlora", "none", model="llama3-8b", gpu="4090").setting


@pytest.mark.parametrize("seq_len", [2048, 8192])
def test_sweep_cells_are_the_plan_choice_or_its_first_runner_up_of_the_method(seq_len: int) -> None:
    def make(method: str, length: int):
        request, _ = plan_request(model="llama3-8b", gpu="4090", seq_len=length, method=method)
        return request

    result = plan(model="llama3-8b", gpu="4090", seq_len=seq_len)
    cells = sweep(make, ["full", "lora", "qlora"], [seq_len]).cells
    for cell in cells:
        if not cell.fits:
            assert cell.method not in {a.setting.method for a in result.alternatives} | {result.best.setting.method}
            continue
        if cell.method == result.best.setting.method:
            assert cell.setting == result.best.setting
        else:
            first = next(a for a in result.alternatives if a.setting.method == cell.method)
            assert cell.setting == first.setting


def test_runner_ups_are_listed_in_the_rules_order() -> None:
    result = plan(model="llama3-8b", gpu="4090", seq_len=8192)
    keys = [choice_key(a.scored, "quality") for a in result.alternatives]
    assert keys == sorted(keys)
    assert all(choice_key(result.best, "quality") < key for key in keys)


def test_each_runner_up_says_why_it_lost_8192() -> None:
    # Issue 19: at seq 8192 a single-GPU LoRA at 1,204 tokens/s was listed unmarked under a chosen ZeRO-3 +
    # offload LoRA at 1,173 tokens/s; it lost because its reserved memory reaches the card. (The issue's adapters were
    # fp32, peft's default then; with compute-dtype adapters, today's default, single-GPU LoRA fits and is chosen.)
    result = plan(model="llama3-8b", gpu="4090", seq_len=8192, adapter_dtype="fp32")
    lora_none = next(a for a in result.alternatives if (a.setting.method, a.setting.sharding) == ("lora", "none"))
    assert lora_none.estimate.tokens_per_s > result.best.estimate.tokens_per_s
    assert lora_none.estimate.reserved_at_capacity and not result.best.estimate.reserved_at_capacity
    assert lora_none.why.startswith("reserved memory at the card")
    for alternative in result.alternatives:
        if alternative.setting.method == "qlora":
            assert alternative.why == "objective quality prefers lora to qlora"


def test_within_the_tie_band_and_slower_are_told_apart() -> None:
    # Gemma-2-9B LoRA on an A10G at seq 512: a CPU-offload runner-up 3.6 % faster (inside its 3.8 % band); Mistral-7B
    # on a 3090 at seq 512: offload runners-up that are slower (one plan had both until FSDP CPU offload on one GPU
    # lost its accumulating settings: planner/space.offload_accumulation_error)
    kinds: set[str] = set()
    for model, gpu in (("gemma2-9b", "a10g"), ("mistral-7b", "3090")):
        result = plan(model=model, gpu=gpu, seq_len=512)
        best = result.best
        same_method = [a for a in result.alternatives if a.setting.method == best.setting.method]
        assert same_method
        for alternative in same_method:
            if alternative.scored.run_time_s < best.run_time_s:
                # faster, yet its extra moving parts cost more than it gains
                assert complexity(alternative.setting) > complexity(best.setting)
                assert adjusted_run_time_s(alternative.scored) > adjusted_run_time_s(best)
                assert alternative.why.startswith("within the tie band")
            else:
                assert alternative.why.startswith("slower: the run takes ")
        kinds |= {a.why.split(":")[0] for a in same_method}
    assert kinds == {"within the tie band", "slower"}


def test_a_faster_setting_with_more_parts_wins_outside_the_band() -> None:
    # The band is per part: 2 % for one extra part. Scale a plan's runner-up times to sit just inside and just
    # outside it and check the rule flips exactly there.
    result = plan(model="llama3-8b", gpu="4090", seq_len=2048)
    best = result.best
    from dataclasses import replace

    from autotune.planner.search import choose

    parts = 2  # CPU offload
    for alternative in result.alternatives:
        if complexity(alternative.setting) - complexity(best.setting) == parts:
            edge = best.run_time_s / (1 + TIE_TOLERANCE * parts)
            inside = replace(alternative.scored, run_time_s=edge * 1.001)
            outside = replace(alternative.scored, run_time_s=edge * 0.999)
            assert choose([best, inside], "quality") is best
            assert choose([best, outside], "quality") is outside
            return
    pytest.fail("no runner-up with CPU offload over a chosen setting without it")


def test_plan_prints_and_json_carries_why_each_runner_up_lost(capsys: pytest.CaptureFixture[str]) -> None:
    fp32 = ("--adapter-dtype", "fp32")  # the issue's example (see test_each_runner_up_says_why_it_lost_8192)
    code, out, _ = run_cli(capsys, "plan", "llama3-8b", "--gpu", "4090", "--seq-len", "8192", *fp32)
    assert code == 0
    assert "why not chosen" in out and "reserved memory at the card" in out
    code, out, _ = run_cli(capsys, "plan", "llama3-8b", "--gpu", "4090", "--seq-len", "8192", *fp32, "--json")
    data = json.loads(out)
    assert all(a["why_not_chosen"] for a in data["alternatives"])
    assert [a["why_not_chosen"] for a in data["plan_file"]["alternatives"]] == [
        a["why_not_chosen"] for a in data["alternatives"]
    ]


def test_verify_replan_follows_the_same_rule() -> None:
    # --verify's re-plan took the fastest traced runner-up that fits; it now takes the rule's first.
    result = plan(model="llama3-8b", gpu="4090", seq_len=8192, adapter_dtype="fp32")
    lora_none = next(a for a in result.alternatives if (a.setting.method, a.setting.sharding) == ("lora", "none"))
    qlora_none = next(a for a in result.alternatives if (a.setting.method, a.setting.sharding) == ("qlora", "none"))
    # Make the LoRA runner-up the fastest, whatever the time model says: the old re-plan took it, the rule does not
    # (its reserved memory is at the card).
    lora_fast = replace(lora_none.scored, run_time_s=0.9 * qlora_none.scored.run_time_s)
    verified = [
        VerifiedSetting(result.best, 30.0, "backward", False),
        VerifiedSetting(lora_fast, 20.0, "backward", True),
        VerifiedSetting(qlora_none.scored, 19.0, "backward", True),
    ]
    new, note = replan(result, verified, "quality")
    assert note is not None and new.best is qlora_none.scored
    whys = {a.setting: a.why for a in new.alternatives}
    assert whys[result.best.setting] == "does not fit by its trace (30.0 GiB peak)"
    assert whys[lora_none.setting].startswith("reserved memory at the card")
