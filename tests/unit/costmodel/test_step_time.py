"""autotune.costmodel.step_time: the step time across micro batch, compile, offload and sharding; the breakdown sums to
the step."""

from __future__ import annotations

import pytest

from autotune.costmodel.estimate import estimate_setting
from autotune.costmodel.step_time import predict_time
from autotune.profiles.catalog import resolve_gpu, resolve_model_profile
from autotune.schemas.calibration import CostCoefficients
from autotune.schemas.hardware import ClusterSpec
from autotune.schemas.setting import TrainingSetting
from autotune.schemas.workload import Workload


def _tokens_per_s(micro: int, seq_len: int, gpu: str = "4090", compile_: bool = False) -> float:
    model = resolve_model_profile("llama3-8b")
    cluster = ClusterSpec(gpu=resolve_gpu(gpu)[0])
    setting = TrainingSetting(method="lora", micro_batch_size=micro, grad_accum=64 // micro, compile=compile_)
    return estimate_setting(model, cluster, Workload(seq_len=seq_len, global_batch_size=64), setting).tokens_per_s


PRIORS = CostCoefficients()


def _cluster(gpu: str, gpus: int = 1) -> ClusterSpec:
    return ClusterSpec(gpu=resolve_gpu(gpu)[0], num_gpus_per_node=gpus)


def test_tokens_per_s_rises_with_micro_batch_where_kernels_are_small() -> None:
    rates = [_tokens_per_s(m, 128) for m in (1, 2, 4, 8, 16)]
    assert rates == sorted(rates)
    assert rates[-1] > 1.5 * rates[0]  # dispatch and per-micro-step costs shared by more tokens


def test_compile_removes_elementwise_traffic_and_launches() -> None:
    assert _tokens_per_s(1, 128, compile_=True) > _tokens_per_s(1, 128)


def test_offload_traffic_is_hidden_only_behind_existing_compute() -> None:
    model = resolve_model_profile("llama3-8b")
    cluster = ClusterSpec(gpu=resolve_gpu("4090")[0])
    coefficients = CostCoefficients()
    setting = TrainingSetting(method="full", sharding="fsdp-offload", precision="bf16", micro_batch_size=1)
    short = predict_time(model, setting, cluster, Workload(seq_len=64, global_batch_size=1), coefficients)
    long = predict_time(model, setting, cluster, Workload(seq_len=4096, global_batch_size=1), coefficients)
    streamed = ("pcie weight streaming", "pcie gradient streaming")
    assert sum(short.breakdown_s[name] for name in streamed) > 0.5  # 16 GB in twice over PCIe, almost no compute
    assert sum(long.breakdown_s[name] for name in streamed) < sum(short.breakdown_s[name] for name in streamed)


def test_breakdown_adds_up_to_the_step() -> None:
    model = resolve_model_profile("llama3-8b")
    cluster = ClusterSpec(gpu=resolve_gpu("a100-80gb")[0], num_gpus_per_node=4)
    setting = TrainingSetting(method="full", sharding="fsdp", micro_batch_size=2, grad_accum=4, precision="bf16-mixed")
    timing = predict_time(model, setting, cluster, Workload(seq_len=2048, global_batch_size=32), CostCoefficients())
    assert sum(timing.breakdown_s.values()) == pytest.approx(timing.step_time_s, rel=1e-6)


def test_a_tiny_model_on_one_gpu_is_slower_with_zero3_offload_than_without_sharding() -> None:
    model = resolve_model_profile("qwen2.5-0.5b")
    workload = Workload(seq_len=128, global_batch_size=2)
    times = {
        sharding: estimate_setting(
            model, _cluster("4090"), workload, TrainingSetting(method="lora", micro_batch_size=2, sharding=sharding)
        ).step_time_s
        for sharding in ("none", "zero3-offload")
    }
    assert times["zero3-offload"] > 1.5 * times["none"]


def test_tokens_per_s_rises_with_micro_batch_where_the_gemms_are_already_full() -> None:
    """Llama-3-8B LoRA on a 4090 at seq 2048: every GEMM fills the SMs at micro batch 1; what rises is the share of
    the per-micro-step costs (the kernels' per-launch GPU cost inside each term, the micro-step overhead)."""
    model = resolve_model_profile("llama3-8b")
    workload = Workload(seq_len=2048, global_batch_size=32)
    rates = [
        estimate_setting(
            model,
            _cluster("4090"),
            workload,
            TrainingSetting(method="lora", micro_batch_size=n, grad_accum=32 // n),
            PRIORS,
        ).tokens_per_s
        for n in (1, 2, 4, 8)
    ]
    assert rates == sorted(rates) and rates[0] < rates[-1]
    terms = predict_time(model, TrainingSetting(method="lora"), _cluster("4090"), workload, PRIORS).breakdown_s
    assert terms["fixed overheads"] > 0
