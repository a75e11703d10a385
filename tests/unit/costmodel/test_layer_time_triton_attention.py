"""flash-triton attention (FlashAttention written in Triton, as llm-foundry ran it for the MPT development data):
flash's FLOPs, causal saving and memory, a slower kernel (``priors.TRITON_FLASH_ATTENTION_TIME_RATIO``), and the
training core refusing it (``autotune trace``: ``test_legacy_attention.test_trace_refuses_it_in_one_line``)."""

from __future__ import annotations

import pytest

from autotune.costmodel.calibration import default_coefficients
from autotune.costmodel.dispatch import layer_ops
from autotune.costmodel.memory import predict_memory
from autotune.costmodel.priors import GPU_KERNEL_MIN_S, TRITON_FLASH_ATTENTION_TIME_RATIO
from autotune.costmodel.step_time import predict_time
from autotune.profiles.catalog import resolve_gpu, resolve_model_profile
from autotune.profiles.measurements import list_measurement_sets
from autotune.schemas.hardware import ClusterSpec
from autotune.schemas.setting import AttentionImpl, TrainingSetting, attention_run_error
from autotune.schemas.workload import Workload

MODEL = resolve_model_profile("llama3-8b")
CLUSTER = ClusterSpec(gpu=resolve_gpu("h100-80gb")[0], num_gpus_per_node=8)


def _setting(attention_impl: AttentionImpl, seq_len: int) -> tuple[TrainingSetting, Workload]:
    setting = TrainingSetting(
        method="full", micro_batch_size=2, grad_accum=4, sharding="fsdp", precision="bf16-mixed",
        attention_impl=attention_impl,
    )  # fmt: skip
    return setting, Workload(seq_len=seq_len, global_batch_size=64)


@pytest.mark.parametrize("seq_len", [1024, 8192])
def test_only_the_attention_term_is_slower_by_the_kernel_ratio(seq_len: int) -> None:
    coefficients = default_coefficients()
    times = {}
    for impl in ("sdpa", "flash-triton"):
        setting, workload = _setting(impl, seq_len)
        times[impl] = predict_time(MODEL, setting, CLUSTER, workload, coefficients)
    sdpa, triton = times["sdpa"].breakdown_s, times["flash-triton"].breakdown_s
    # the kernels' per-launch GPU cost (GPU_KERNEL_MIN_S, inside the term) is the same for both kernels
    ops = layer_ops(MODEL, trainable=True)
    setting, _ = _setting("sdpa", seq_len)
    per_layer = (1 + setting.grad_ckpt) * ops.forward_attention_kernels + ops.backward_attention_kernels
    tails = setting.grad_accum * MODEL.num_hidden_layers * per_layer * GPU_KERNEL_MIN_S
    assert triton["attention"] - tails == pytest.approx(
        TRITON_FLASH_ATTENTION_TIME_RATIO * (sdpa["attention"] - tails), rel=1e-9
    )
    assert sdpa["attention"] > 0
    assert {k: v for k, v in triton.items() if k != "attention"} == pytest.approx(
        {k: v for k, v in sdpa.items() if k != "attention"}
    )


def test_memory_is_flash_memory() -> None:
    """The Triton kernel is a flash kernel: no s×s scores are kept, the peak is SDPA's."""
    peaks = {}
    for impl in ("sdpa", "flash-triton", "eager"):
        setting, workload = _setting(impl, 4096)
        peaks[impl] = predict_memory(MODEL, setting, CLUSTER, workload, default_coefficients()).peak_allocated_bytes
    assert peaks["flash-triton"] == peaks["sdpa"] < peaks["eager"]


def test_the_mpt_development_rows_are_transcribed_with_it() -> None:
    (mpt,) = (s for s in list_measurement_sets() if s.name == "dev-mpt-llm-foundry")
    rows = mpt.measurements
    assert rows and {row.setting.attention_impl for row in rows} == {"flash-triton"}


def test_run_error_says_what_it_describes() -> None:
    error = attention_run_error("flash-triton")
    assert error is not None and "triton" in error and "sdpa or eager" in error
