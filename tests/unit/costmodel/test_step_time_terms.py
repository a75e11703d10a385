"""autotune.costmodel.step_time (issue 18): time as named terms that sum to the step time, and the micro-batch gain the
H100 measured."""

from __future__ import annotations

import pytest

from autotune.costmodel.calibration import default_coefficients
from autotune.costmodel.estimate import estimate_setting
from autotune.costmodel.step_time import TERM_LABELS, predict_time
from autotune.profiles.catalog import resolve_gpu, resolve_model_profile
from autotune.schemas.hardware import ClusterSpec
from autotune.schemas.setting import TrainingSetting
from autotune.schemas.workload import Workload

LLAMA = resolve_model_profile("llama3-8b")


def _cluster(gpu: str, gpus: int = 1, nodes: int = 1) -> ClusterSpec:
    return ClusterSpec(gpu=resolve_gpu(gpu)[0], num_gpus_per_node=gpus, num_nodes=nodes, host_memory_gib_per_node=512)


SETTINGS = [
    ("h100", 1, TrainingSetting(method="full", compile=True, optimizer="adamw-8bit", grad_accum=4)),
    ("h100", 1, TrainingSetting(method="lora", micro_batch_size=2, grad_accum=3, lora_dropout=0.05)),
    ("4090", 1, TrainingSetting(method="qlora", grad_ckpt=False, adapter_dtype="compute")),
    ("a100", 8, TrainingSetting(method="full", sharding="fsdp", precision="bf16-mixed", grad_accum=2)),
    ("a100", 4, TrainingSetting(method="full", sharding="zero3-offload", precision="bf16-mixed")),
    ("a100", 4, TrainingSetting(method="lora", sharding="ddp", grad_accum=2)),
    ("a100", 4, TrainingSetting(method="full", sharding="zero2", precision="bf16-mixed")),
    ("4090", 2, TrainingSetting(method="lora", sharding="fsdp-offload")),
]


@pytest.mark.parametrize(("gpu", "gpus", "setting"), SETTINGS)
def test_the_terms_sum_to_the_step_time(gpu: str, gpus: int, setting: TrainingSetting) -> None:
    cluster = _cluster(gpu, gpus)
    workload = Workload(seq_len=2048, global_batch_size=setting.micro_batch_size * setting.grad_accum * gpus)
    timing = predict_time(LLAMA, setting, cluster, workload, default_coefficients())
    assert list(timing.breakdown_s) == list(TERM_LABELS.values())
    assert all(value >= 0 for value in timing.breakdown_s.values())
    assert sum(timing.breakdown_s.values()) == pytest.approx(timing.step_time_s, rel=1e-12)
    assert timing.step_time_s == pytest.approx(
        setting.grad_accum * timing.micro_step_time_s + timing.optimizer_time_s, rel=1e-12
    )
    estimate = estimate_setting(LLAMA, cluster, workload, setting)
    assert sum(estimate.time_breakdown_s.values()) == pytest.approx(estimate.step_time_s, rel=1e-4)


def test_micro_batch_1_to_4_gains_what_the_h100_measured() -> None:
    """`autotune estimate llama3-8b --gpu h100 --method lora --seq-len 2048 --grad-ckpt` at the settings the core's
    runs measured (fp32 adapters, dropout 0.05: peft's defaults then): the measured rise from micro batch 1 to 4 is
    +42 % (3,803 → 5,387 tokens/s); issue 18 asks for +32 %..+52 %. (Today's defaults, compute-dtype adapters and
    no dropout, are not measured on a GPU yet.)"""
    cluster = _cluster("h100")
    rates = [
        estimate_setting(
            LLAMA,
            cluster,
            Workload(seq_len=2048, global_batch_size=micro),
            TrainingSetting(
                method="lora", micro_batch_size=micro, grad_ckpt=True, adapter_dtype="fp32", lora_dropout=0.05
            ),
        ).tokens_per_s
        for micro in (1, 4)
    ]
    assert 0.32 <= rates[1] / rates[0] - 1 <= 0.52
