"""Host RAM and disk per node for the SkyPilot task: weights, checkpoints, dataset and the offload's host memory."""

from __future__ import annotations

import pytest

from autotune.costmodel.node_storage import (
    CHECKPOINTS_ON_DISK,
    ENVIRONMENT_ALLOWANCE_BYTES,
    checkpoint_bytes,
    node_disk_bytes,
    node_memory_bytes,
    node_needs,
)
from autotune.costmodel.params import count_params, lora_params
from autotune.profiles.catalog import resolve_gpu, resolve_model_profile
from autotune.schemas.model import ModelSpec
from autotune.schemas.setting import TrainingSetting
from autotune.units import GIB


@pytest.fixture(scope="module")
def model() -> ModelSpec:
    return resolve_model_profile("llama3-8b")


def test_a_full_checkpoint_holds_the_weights_and_both_adam_moments(model: ModelSpec) -> None:
    gpu, _ = resolve_gpu("h100")
    full = TrainingSetting(method="full", precision="bf16", optimizer="adamw", sharding="none")
    params = count_params(model).total_params
    assert checkpoint_bytes(model, full, gpu) == pytest.approx(params * (2 + 2 * 2))  # pure bf16: 2 + 2 moments × 2


def test_an_adapter_checkpoint_holds_only_the_adapters(model: ModelSpec) -> None:
    gpu, _ = resolve_gpu("h100")
    lora = TrainingSetting(method="lora", precision="bf16", optimizer="adamw", sharding="none", adapter_dtype="fp32")
    adapters = lora_params(model, lora.lora_rank, lora.lora_targets)
    assert checkpoint_bytes(model, lora, gpu) == pytest.approx(adapters * (4 + 8))  # fp32 adapters + 2 fp32 moments
    assert checkpoint_bytes(model, lora, gpu) < 0.05 * count_params(model).total_params * 2  # a few % of the weights


def test_disk_and_memory_are_the_sum_and_the_larger_of_their_parts(model: ModelSpec) -> None:
    gpu, _ = resolve_gpu("h100")
    setting = TrainingSetting(method="full", precision="bf16", optimizer="adamw", sharding="none")
    weights = count_params(model).total_params * 2
    expected = (
        weights + CHECKPOINTS_ON_DISK * checkpoint_bytes(model, setting, gpu) + 10**9 + ENVIRONMENT_ALLOWANCE_BYTES
    )
    assert node_disk_bytes(model, setting, gpu, 10**9) == pytest.approx(expected)
    assert node_memory_bytes(model, setting, gpu, 1, 0.0) == pytest.approx(weights)  # loaded through host RAM
    assert node_memory_bytes(model, setting, gpu, 1, 500.0) == 500.0 * GIB  # an offload needing more sets it
    needs = node_needs(model, setting, gpu, 1, 0.0, 0)
    assert needs.memory_gib == pytest.approx(weights / GIB) and needs.disk_gib > needs.memory_gib


def test_ddp_loads_a_copy_per_process_fsdp_one_and_qlora_none(model: ModelSpec) -> None:
    gpu, _ = resolve_gpu("h100")
    weights = count_params(model).total_params * 2
    ddp = TrainingSetting(method="lora", precision="bf16", sharding="ddp")
    fsdp = TrainingSetting(method="lora", precision="bf16", sharding="fsdp")
    qlora = TrainingSetting(method="qlora", precision="bf16", sharding="ddp")
    assert node_memory_bytes(model, ddp, gpu, 8, 0.0) == pytest.approx(8 * weights)
    assert node_memory_bytes(model, fsdp, gpu, 8, 0.0) == pytest.approx(weights)
    assert node_memory_bytes(model, qlora, gpu, 8, 0.0) == 0.0
