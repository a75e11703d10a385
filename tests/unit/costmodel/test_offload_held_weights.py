"""FSDP CPU offload on one GPU keeps the forward's weight copies alive until the backward (FSDP1 clamps FULL_SHARD to
NO_SHARD at world size 1 and does not free after forward): the memory model counts them in the phases before the
backward releases them, and only where that happens."""

from __future__ import annotations

import pytest

from autotune.costmodel.context import setting_context
from autotune.costmodel.memory import (
    activation_terms,
    base_weight_bytes,
    holds_forward_weight_copies,
    memory_phases,
    model_state_bytes,
)
from autotune.costmodel.precision import dtype_bytes
from autotune.profiles.catalog import resolve_gpu, resolve_model_profile
from autotune.schemas.hardware import ClusterSpec
from autotune.schemas.setting import TrainingSetting
from autotune.schemas.workload import Workload

WORKLOAD = Workload(seq_len=2048, global_batch_size=8)
MODEL = resolve_model_profile("llama3-8b")
GPU = resolve_gpu("h200")[0]


def _phases(setting: TrainingSetting, gpus: int = 1) -> dict[str, dict[str, float]]:
    cluster = ClusterSpec(gpu=GPU, num_gpus_per_node=gpus)
    context = setting_context(MODEL, setting, cluster, WORKLOAD)
    states = model_state_bytes(MODEL, setting, cluster, context.dtypes, context)
    return memory_phases(context, states, activation_terms(context))  # type: ignore[return-value]


def _setting(**changes: object) -> TrainingSetting:
    base = {"method": "lora", "sharding": "fsdp-offload", "micro_batch_size": 1, "grad_accum": 8, "grad_ckpt": False}
    return TrainingSetting(**{**base, **changes})


def test_one_gpu_without_checkpointing_holds_every_weight_until_the_backward() -> None:
    held = _setting()
    with_ckpt = _setting(grad_ckpt=True)
    context = setting_context(MODEL, held, ClusterSpec(gpu=GPU), WORKLOAD)
    weights = base_weight_bytes(MODEL, context.counts, held, context.dtypes)
    extra = (
        _phases(held)["forward/backward"]["gathered weights"]
        - _phases(with_ckpt)["forward/backward"]["gathered weights"]
    )
    assert extra == pytest.approx(weights)
    assert weights / 2**30 == pytest.approx(14.96, abs=0.05)  # 8.03 B bf16 parameters
    # released layer by layer in the backward: the late-backward phase holds only the live units
    assert _phases(held)["late backward"]["gathered weights"] == _phases(with_ckpt)["late backward"]["gathered weights"]


@pytest.mark.parametrize(
    ("changes", "gpus"),
    [
        ({"grad_ckpt": True}, 1),  # a checkpointed layer saves no weights
        ({}, 2),  # FULL_SHARD frees the unsharded unit after forward
        ({"sharding": "zero3-offload"}, 1),  # ZeRO-3 releases partitioned parameters after use
        ({"method": "full", "precision": "bf16-mixed"}, 1),  # MixedPrecision's low-precision copy is freed
    ],
)
def test_nothing_is_held_where_fsdp_frees_or_no_weight_is_saved(changes: dict[str, object], gpus: int) -> None:
    setting = _setting(**changes)
    dtypes = dtype_bytes(setting, GPU)
    assert not holds_forward_weight_copies(setting, gpus, dtypes)
    assert holds_forward_weight_copies(_setting(), 1, dtype_bytes(_setting(), GPU))
