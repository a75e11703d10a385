"""bf16 stochastic rounding (torchao's AdamW) in the cost model: no step temporary, a compiled call per parameter."""

from __future__ import annotations

import pytest

from autotune.costmodel.memory import predict_memory
from autotune.costmodel.optimizer_step import TORCHAO_STEP_CALL_S, optimizer_step_s, trainable_tensors
from autotune.costmodel.params import linear_modules, lora_layout
from autotune.costmodel.precision import dtype_bytes
from autotune.profiles.catalog import resolve_gpu, resolve_model_profile
from autotune.schemas.calibration import CostCoefficients
from autotune.schemas.hardware import ClusterSpec
from autotune.schemas.setting import TrainingSetting
from autotune.schemas.workload import Workload


def _cluster() -> ClusterSpec:
    gpu, _ = resolve_gpu("h100")
    return ClusterSpec(gpu=gpu, host_memory_gib_per_node=256)


def test_rounding_has_no_optimizer_temporary() -> None:
    """torch's foreach AdamW holds a moment-sized temporary per parameter; torchao's fused step none."""
    cluster = _cluster()
    plain = TrainingSetting(method="full", micro_batch_size=1)
    rounded = plain.model_copy(update={"bf16_stochastic_rounding": True})
    assert dtype_bytes(plain, cluster.gpu).optimizer_temp_bytes == 2.0  # bf16 moments
    assert dtype_bytes(rounded, cluster.gpu).optimizer_temp_bytes == 0.0
    model, workload = resolve_model_profile("llama3-8b"), Workload(seq_len=2048, global_batch_size=1)
    before = predict_memory(model, plain, cluster, workload, CostCoefficients())
    after = predict_memory(model, rounded, cluster, workload, CostCoefficients())
    step_buffers = before.phases_bytes["optimizer step"]["optimizer step buffers"]
    assert step_buffers > 0 and after.phases_bytes["optimizer step"]["optimizer step buffers"] == 0
    assert (
        after.phases_bytes["optimizer step"]["optimizer states"]
        == before.phases_bytes["optimizer step"]["optimizer states"]
    )  # the moments stay bf16


def test_rounded_step_is_priced_per_compiled_call_on_a_small_model() -> None:
    """Where bytes are few the CPU bounds the step: one compiled call per tensor (the measured figure) dominates."""
    model = resolve_model_profile("llama3-8b").model_copy(update={"hidden_size": 64, "intermediate_size": 128})
    cluster, coefficients = _cluster(), CostCoefficients()
    rounded = TrainingSetting(method="full", micro_batch_size=1, bf16_stochastic_rounding=True)
    tensors = trainable_tensors(model, rounded, modules=linear_modules(model), lora=lora_layout(model, rounded))
    dtypes = dtype_bytes(rounded, cluster.gpu)
    step = optimizer_step_s(model, rounded, cluster.gpu, dtypes, 1e6, coefficients, tensors=tensors)
    assert step >= tensors * TORCHAO_STEP_CALL_S
    assert step == pytest.approx(tensors * TORCHAO_STEP_CALL_S, rel=0.05)  # plus clipping's few foreach calls
