"""autotune.costmodel.collectives: latency-bound small collectives, ZeRO-3's per-module hooks."""

from __future__ import annotations

import pytest

from autotune.costmodel.collectives import collective_time_s, zero3_modules_with_parameters
from autotune.costmodel.params import linear_modules
from autotune.costmodel.step_time import predict_time
from autotune.profiles.catalog import resolve_gpu, resolve_model_profile
from autotune.schemas.calibration import CostCoefficients
from autotune.schemas.hardware import ClusterSpec
from autotune.schemas.setting import TrainingSetting
from autotune.schemas.workload import Workload

PRIORS = CostCoefficients()


def _cluster(gpu: str, gpus: int = 1) -> ClusterSpec:
    return ClusterSpec(gpu=resolve_gpu(gpu)[0], num_gpus_per_node=gpus)


def test_many_small_collectives_are_latency_bound() -> None:
    gpu, _ = resolve_gpu("h100-80gb")
    cluster = ClusterSpec(gpu=gpu, num_gpus_per_node=8)
    coefficients = CostCoefficients()
    one_big = collective_time_s("all-gather", 1e9, cluster, coefficients)
    many_small = collective_time_s("all-gather", 1e9 / 1000, cluster, coefficients, count=1000)
    assert many_small > one_big + 900 * coefficients.collective_latency_s
    assert collective_time_s("all-gather", 1e9, ClusterSpec(gpu=gpu), coefficients) == 0.0


def test_zero3_hooks_per_module_and_pass_only_under_deepspeed_zero3() -> None:
    model = resolve_model_profile("qwen2.5-0.5b")
    # 7 linears + 2 norms per layer, plus embedding, final norm and lm_head
    assert zero3_modules_with_parameters(model, linear_modules(model)) == model.num_hidden_layers * 9 + 3
    workload = Workload(seq_len=128, global_batch_size=2)
    cluster = _cluster("4090")

    def hooks(sharding: str, grad_ckpt: bool) -> float:
        setting = TrainingSetting(method="lora", micro_batch_size=2, sharding=sharding, grad_ckpt=grad_ckpt)
        return predict_time(model, setting, cluster, workload, PRIORS).breakdown_s["zero-3 module hooks"]

    per_pass = zero3_modules_with_parameters(model, linear_modules(model)) * PRIORS.zero3_module_fetch_s
    assert hooks("zero3-offload", grad_ckpt=True) == pytest.approx(3 * per_pass)  # forward, recompute, backward
    assert hooks("zero3-offload", grad_ckpt=False) == pytest.approx(2 * per_pass)
    assert hooks("none", grad_ckpt=True) == hooks("fsdp-offload", grad_ckpt=True) == 0.0
