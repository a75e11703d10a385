"""The candidate space: the attention implementation the core can run, and the shardings one GPU takes."""

from __future__ import annotations

from typing import Any

import pytest

from autotune.errors import InvalidRequestError
from autotune.planner.request import Overrides, PlanRequest
from autotune.planner.search import search
from autotune.planner.space import (
    SINGLE_GPU_SHARDINGS,
    candidates,
    check_overrides_supported,
    offload_accumulation_error,
    sharding_error,
)
from autotune.profiles.catalog import resolve_gpu, resolve_model_profile
from autotune.schemas.hardware import ClusterSpec
from autotune.schemas.workload import Workload


def _chosen_attention(model_key: str) -> str:
    model = resolve_model_profile(model_key)
    cluster = ClusterSpec(gpu=resolve_gpu("h100")[0])
    workload = Workload(seq_len=1024, global_batch_size=8)
    result = search(PlanRequest(model=model, model_source="catalog", cluster=cluster, workload=workload))
    assert result.best is not None
    return result.best.setting.attention_impl


def test_softcapped_attention_is_planned_eager() -> None:
    # transformers refuses SDPA for Gemma 2 (its logits are soft-capped): a plan saying sdpa could not launch.
    assert _chosen_attention("gemma2-2b") == "eager"


def test_other_models_keep_sdpa() -> None:
    assert _chosen_attention("llama3.2-1b") == "sdpa"


def _one_gpu_request(**overrides: Any) -> PlanRequest:
    return PlanRequest(
        model=resolve_model_profile("llama3.2-1b"),
        model_source="catalog",
        cluster=ClusterSpec(gpu=resolve_gpu("h100")[0]),
        workload=Workload(seq_len=1024, global_batch_size=8),
        overrides=Overrides(**overrides),
    )


@pytest.mark.parametrize(
    ("sharding", "runs"),
    [
        ("none", True),
        ("fsdp-offload", True),
        ("zero3-offload", True),
        ("zero2", True),  # issue 28: DeepSpeed runs ZeRO in one process; what the user names is what runs
        ("zero3", True),
        ("ddp", False),
        ("fsdp", False),
    ],
)
def test_what_a_user_may_name_on_one_gpu(sharding: str, runs: bool) -> None:
    error = sharding_error(sharding, world_size=1)
    assert (error is None) == runs
    if error:
        assert error.startswith(f"--sharding {sharding} needs more than one GPU")
        assert error.endswith("on one GPU use none, fsdp-offload, zero2, zero3 or zero3-offload")


def test_the_planner_does_not_search_zero_without_offload_on_one_gpu() -> None:
    """On one rank ZeRO-2 / ZeRO-3 partition nothing: the planner's own search keeps to none and the offloads."""
    searched = {s.sharding for s in candidates(_one_gpu_request(method="lora"))}
    assert searched == set(SINGLE_GPU_SHARDINGS)
    assert not searched & {"zero2", "zero3"}


@pytest.mark.parametrize("sharding", ["zero2", "zero3"])
def test_a_named_zero_stage_is_planned_on_one_gpu(sharding: str) -> None:
    request = _one_gpu_request(method="lora", sharding=sharding)
    check_overrides_supported(request)  # no refusal
    result = search(request)
    assert result.best is not None and result.best.setting.sharding == sharding


def _request(world_size: int, **overrides: Any) -> PlanRequest:
    return PlanRequest(
        model=resolve_model_profile("llama3.2-1b"),
        model_source="catalog",
        cluster=ClusterSpec(gpu=resolve_gpu("h100")[0], num_gpus_per_node=world_size),
        workload=Workload(seq_len=1024, global_batch_size=8 * world_size),
        overrides=Overrides(**overrides),
    )


def test_fsdp_offload_accumulates_only_under_no_sync() -> None:
    """torch FSDP with CPU offload overwrites the host gradient each micro-step outside no_sync() (its docstring's
    Limitations); accelerate enters no_sync only with several processes and not with sync_each_batch. So FSDP offload
    is searched with one micro-step on one GPU, and with ``last-micro-step`` only when several GPUs accumulate."""
    one = [s for s in candidates(_request(1, method="lora")) if s.sharding == "fsdp-offload"]
    assert one and {s.grad_accum for s in one} == {1}
    assert any(s.grad_accum > 1 for s in candidates(_request(1, method="lora")) if s.sharding == "zero3-offload")
    several = [s for s in candidates(_request(2, method="lora")) if s.sharding == "fsdp-offload"]
    assert {s.grad_sync for s in several if s.grad_accum > 1} == {"last-micro-step"}
    assert {
        s.grad_sync for s in candidates(_request(2, method="lora")) if s.sharding == "fsdp" and s.grad_accum > 1
    } == {
        "last-micro-step",
        "every-micro-step",
    }
    assert offload_accumulation_error("fsdp-offload", 1, "last-micro-step", 1) is None
    assert offload_accumulation_error("fsdp-offload", 2, "last-micro-step", 2) is None
    assert offload_accumulation_error("zero3-offload", 4, "last-micro-step", 1) is None
    assert "on one GPU cannot accumulate" in (offload_accumulation_error("fsdp-offload", 4, "last-micro-step", 1) or "")
    assert "--grad-sync last-micro-step" in (offload_accumulation_error("fsdp-offload", 4, "every-micro-step", 2) or "")


@pytest.mark.parametrize(
    ("world_size", "overrides", "refused"),
    [
        (1, {"sharding": "fsdp-offload", "micro_batch_size": 2}, True),
        (1, {"sharding": "fsdp-offload", "grad_accum": 2}, True),
        (1, {"sharding": "fsdp-offload", "micro_batch_size": 8}, False),
        (1, {"sharding": "fsdp-offload"}, False),  # the planner keeps to one micro-step
        (2, {"sharding": "fsdp-offload", "micro_batch_size": 2}, False),
        (2, {"sharding": "fsdp-offload", "micro_batch_size": 2, "grad_sync": "every-micro-step"}, True),
    ],
)
def test_forced_fsdp_offload_that_would_accumulate_wrongly_is_refused(
    world_size: int, overrides: dict[str, Any], refused: bool
) -> None:
    request = _request(world_size, **overrides)
    if refused:
        with pytest.raises(InvalidRequestError, match="last micro-batch's gradient"):
            check_overrides_supported(request)
    else:
        check_overrides_supported(request)
