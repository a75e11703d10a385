"""Planner behaviour: feasibility, objectives, overrides, explanations."""

from __future__ import annotations

import pytest
from plan_requests import plan_request

from autotune.errors import InfeasibleError, InvalidRequestError
from autotune.planner import search
from autotune.planner.search import METHOD_QUALITY_ORDER


def plan(**options):
    request, _ = plan_request(**options)
    return request, search(request)


def test_llama3_8b_on_4090_fits_in_24_gib_and_explains_full():
    _request, result = plan(model="llama3-8b", gpu="4090", seq_len=2048)
    best = result.best
    assert best.estimate.fits
    e = best.estimate
    assert e.peak_memory_gib + e.cuda_context_gib + e.memory_headroom_gib <= 24
    assert best.setting.method in ("lora", "qlora")
    assert best.setting.micro_batch_size * best.setting.grad_accum == 32
    reasons = dict(result.rejected)
    assert "full" in reasons and "24 GiB" in reasons["full"]


def test_every_alternative_fits_and_ranks_after_the_best():
    _request, result = plan(model="llama3-8b", gpu="a100-80gb", seq_len=4096)
    assert result.alternatives
    best_rank = METHOD_QUALITY_ORDER[result.best.setting.method]
    for alternative in result.alternatives:
        assert alternative.estimate.fits
        assert METHOD_QUALITY_ORDER[alternative.setting.method] >= best_rank


def test_quality_prefers_full_when_it_fits():
    _, result = plan(model="qwen2.5-0.5b", gpu="h100", seq_len=1024)
    assert result.best.setting.method == "full"


def test_speed_objective_is_at_least_as_fast_as_quality():
    _, quality = plan(model="llama3-8b", gpu="a100", seq_len=2048)
    _, speed = plan(model="llama3-8b", gpu="a100", seq_len=2048, objective="speed")
    assert speed.best.run_time_s <= quality.best.run_time_s * (1 + 1e-9) * 1.03


def test_memory_objective_minimises_peak():
    _, memory = plan(model="llama3-8b", gpu="4090", seq_len=2048, objective="memory")
    _, quality = plan(model="llama3-8b", gpu="4090", seq_len=2048)
    assert memory.best.estimate.peak_memory_gib <= quality.best.estimate.peak_memory_gib


def test_forced_choices_are_kept_and_rest_optimised():
    _, result = plan(model="llama3-8b", gpu="4090", method="qlora", micro_batch_size=2, compile=False)
    s = result.best.setting
    assert (s.method, s.micro_batch_size, s.compile) == ("qlora", 2, False)
    assert s.grad_accum == 16


def test_forced_full_on_4090_is_infeasible_with_numbers_and_nearest():
    with pytest.raises(InfeasibleError) as error:
        plan(model="llama3-8b", gpu="4090", method="full", sharding="none", global_batch_size=32)
    message = str(error.value)
    assert "method=full" in message and "GiB" in message and "Nearest that fits" in message


def test_bitsandbytes_methods_are_not_planned_on_rocm():
    _, result = plan(model="llama3-8b", gpu="7900xtx", seq_len=2048)
    assert result.best.setting.method != "qlora"
    assert result.best.setting.optimizer == "adamw"
    assert "qlora" in dict(result.rejected)
    with pytest.raises(InvalidRequestError, match="bitsandbytes"):
        plan(model="llama3-8b", gpu="7900xtx", method="qlora")


def test_no_bf16_gpu_gets_fp16_mixed():
    _, result = plan(model="llama3.2-1b", gpu="t4", seq_len=1024)
    assert result.best.setting.precision == "fp16-mixed"
    with pytest.raises(InvalidRequestError, match="bf16"):
        plan(model="llama3.2-1b", gpu="t4", precision="bf16")


def test_multi_gpu_picks_a_data_parallel_sharding_and_splits_the_batch():
    _, result = plan(model="llama3-70b", gpu="h100", num_gpus=8, seq_len=4096, global_batch_size=64)
    s = result.best.setting
    assert s.sharding in ("fsdp", "fsdp-offload", "zero3", "zero3-offload", "zero2", "ddp")
    assert s.micro_batch_size * s.grad_accum * 8 == 64


def test_offload_needs_host_ram():
    with pytest.raises(InfeasibleError, match="host RAM"):
        plan(model="llama3-8b", gpu="4090", method="full", sharding="zero3-offload", host_memory_gib=16)


def test_single_gpu_zero_offload_is_allowed_but_plain_ddp_is_not():
    _, result = plan(model="llama3-8b", gpu="4090", sharding="zero3-offload", method="lora")
    assert result.best.setting.sharding == "zero3-offload"
    with pytest.raises(InvalidRequestError, match="more than one GPU"):
        plan(model="llama3-8b", gpu="4090", sharding="ddp")


def test_inconsistent_batch_options_are_rejected():
    with pytest.raises(InvalidRequestError, match="global-batch-size"):
        plan(model="llama3-8b", gpu="4090", micro_batch_size=4, grad_accum=4, global_batch_size=32)


def test_compile_is_chosen_only_when_it_pays_for_itself():
    # a tiny run (8 samples) cannot amortise the compile time; a long one can
    _, short = plan(model="llama3.2-1b", gpu="h100", seq_len=512, num_samples=32, method="lora")
    _, long_ = plan(model="llama3.2-1b", gpu="h100", seq_len=512, num_samples=500_000, method="lora")
    assert short.best.setting.compile is False
    assert long_.best.setting.compile is True


def test_fsdp_gradient_sync_is_searched_where_it_differs_and_chosen_when_only_it_fits():
    from autotune.costmodel.estimate import estimate_setting
    from autotune.planner.space import candidates

    request, result = plan(model="llama3-70b", gpu="a100", num_gpus=8, seq_len=4096, method="full")
    syncs = {(s.sharding, s.grad_accum > 1, s.grad_sync) for s in candidates(request)}
    assert ("fsdp", True, "every-micro-step") in syncs and ("fsdp", True, "last-micro-step") in syncs
    assert ("fsdp", False, "every-micro-step") not in syncs  # nothing to accumulate: one choice
    assert not {sync for sharding, _, sync in syncs if sharding in ("ddp", "zero3")} - {"last-micro-step"}
    best = result.best.setting
    assert best.uses_fsdp and best.grad_sync == "every-micro-step"
    # The same setting under the HF Trainer's default no_sync accumulation keeps unsharded gradients: no fit.
    no_sync = best.model_copy(update={"grad_sync": "last-micro-step"})
    assert not estimate_setting(request.model, request.cluster, request.workload, no_sync, request.coefficients).fits


def test_forced_gradient_sync_keeps_to_fsdp_and_is_refused_where_it_cannot_apply():
    _, result = plan(model="llama3-8b", gpu="a100", num_gpus=4, method="full", grad_sync="every-micro-step")
    assert all(s.setting.uses_fsdp for s in (result.best, *result.alternatives))
    assert result.best.setting.grad_sync == "every-micro-step" or result.best.setting.grad_accum == 1
    with pytest.raises(InvalidRequestError, match="grad-sync every-micro-step applies to FSDP"):
        plan(model="llama3-8b", gpu="a100", num_gpus=4, sharding="ddp", grad_sync="every-micro-step")
    with pytest.raises(InvalidRequestError, match="grad-sync every-micro-step applies to FSDP"):
        plan(model="llama3-8b", gpu="4090", grad_sync="every-micro-step")
