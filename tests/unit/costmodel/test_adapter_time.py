"""autotune.costmodel.adapter_time: LoRA's element-wise work and QLoRA's dequantization, counted."""

from __future__ import annotations

import pytest

from autotune.costmodel import adapter_time
from autotune.costmodel.step_time import predict_time
from autotune.profiles.catalog import resolve_gpu, resolve_model_profile
from autotune.schemas.calibration import CostCoefficients
from autotune.schemas.hardware import ClusterSpec
from autotune.schemas.setting import TrainingSetting
from autotune.schemas.workload import Workload

PRIORS = CostCoefficients()


LLAMA = resolve_model_profile("llama3-8b")


def _cluster(gpu: str, gpus: int = 1, nodes: int = 1) -> ClusterSpec:
    return ClusterSpec(gpu=resolve_gpu(gpu)[0], num_gpus_per_node=gpus, num_nodes=nodes, host_memory_gib_per_node=512)


def test_lora_element_wise_work_is_counted_from_what_peft_runs() -> None:
    fp32_dropout_fwd, fp32_dropout_bwd = adapter_time.lora_ops(4.0, 2.0, dropout=True)
    # cast (2 + 4) + dropout (4 + 4 + 1 mask) per input feature; scale 8 + add 10 + cast back 6 per output feature
    assert (fp32_dropout_fwd.bytes_per_in_feature, fp32_dropout_fwd.bytes_per_out_feature) == (15.0, 24.0)
    assert fp32_dropout_fwd.kernels == 7
    plain_fwd, plain_bwd = adapter_time.lora_ops(2.0, 2.0, dropout=False)
    # compute-dtype adapters without dropout: no cast, no mask; scale 4 + add 6 per output feature, nothing in
    assert (plain_fwd.bytes_per_in_feature, plain_fwd.bytes_per_out_feature, plain_fwd.kernels) == (0.0, 10.0, 4)
    assert plain_bwd.bytes_per_in_feature == 6.0  # only x's gradient accumulation (3 × 2 bytes)
    assert plain_bwd.kernels == fp32_dropout_bwd.kernels - 4  # two grad casts, the dropout and the input cast

    cluster = _cluster("h100")
    workload = Workload(seq_len=2048, global_batch_size=4)

    def lora_s(**fields: object) -> float:
        setting = TrainingSetting(method="lora", micro_batch_size=4, **fields)  # type: ignore[arg-type]
        return predict_time(LLAMA, setting, cluster, workload, PRIORS).breakdown_s["lora adapters"]

    compute_s = lora_s(lora_dropout=0.0, adapter_dtype="compute")
    assert compute_s < lora_s(lora_dropout=0.0, adapter_dtype="fp32") < lora_s(lora_dropout=0.1, adapter_dtype="fp32")


def test_qlora_dequantizes_every_linear_in_every_pass() -> None:
    cluster = _cluster("h100")
    workload = Workload(seq_len=2048, global_batch_size=1)

    def dequant_s(grad_ckpt: bool) -> float:
        setting = TrainingSetting(method="qlora", grad_ckpt=grad_ckpt)
        return predict_time(LLAMA, setting, cluster, workload, PRIORS).breakdown_s["qlora dequant"]

    # forward, recompute, backward (3 passes) vs forward, backward (2)
    assert dequant_s(True) / dequant_s(False) == pytest.approx(1.5, rel=1e-9)
    assert (
        predict_time(LLAMA, TrainingSetting(method="lora"), cluster, workload, PRIORS).breakdown_s["qlora dequant"] == 0
    )
