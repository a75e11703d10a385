"""autotune.costmodel.model_flops.model_flops_per_micro_step: the FLOPs the method does (6·N full fine-tuning, 4·N for
LoRA / QLoRA's frozen base, plus PaLM's attention term), not the recomputation; MFU in the estimate follows."""

from __future__ import annotations

import pytest

from autotune.costmodel.context import setting_context
from autotune.costmodel.estimate import estimate_setting
from autotune.costmodel.model_flops import model_flops_per_micro_step
from autotune.profiles.catalog import resolve_gpu, resolve_model_profile
from autotune.schemas.hardware import ClusterSpec
from autotune.schemas.setting import TrainingSetting
from autotune.schemas.workload import Workload

MODEL = resolve_model_profile("llama3-8b")
CLUSTER = ClusterSpec(gpu=resolve_gpu("h100")[0])
WORKLOAD = Workload(seq_len=2048, global_batch_size=4)
N = 7_504_658_432  # Llama-3-8B: 32 × 218,103,808 decoder-linear weights + the 128,256 × 4,096 output projection
ATTENTION_PER_TOKEN = 12 * 32 * 32 * 128 * 2048  # 12 · layers · heads · head_dim · seq_len (PaLM appendix B)


def _flops_per_token(method: str, ckpt: bool = False) -> float:
    setting = TrainingSetting(method=method, micro_batch_size=2, grad_accum=2, grad_ckpt=ckpt, precision="bf16")
    return model_flops_per_micro_step(setting_context(MODEL, setting, CLUSTER, WORKLOAD)) / (2 * 2048)


def test_full_fine_tuning_counts_6n_lora_and_qlora_4n_plus_attention() -> None:
    assert _flops_per_token("full") == pytest.approx(6 * N + ATTENTION_PER_TOKEN)
    assert _flops_per_token("lora") == pytest.approx(4 * N + ATTENTION_PER_TOKEN)
    assert _flops_per_token("qlora") == pytest.approx(4 * N + ATTENTION_PER_TOKEN)


def test_recomputation_is_not_model_flops() -> None:
    assert _flops_per_token("lora", ckpt=True) == _flops_per_token("lora", ckpt=False)


def test_the_estimates_mfu_is_the_methods_flops_times_tokens_per_s_over_the_peak() -> None:
    setting = TrainingSetting(method="lora", micro_batch_size=2, grad_accum=2, precision="bf16")
    estimate = estimate_setting(MODEL, CLUSTER, WORKLOAD, setting)
    peak_flops_per_s = CLUSTER.gpu.matmul_tflops("bf16") * 1e12
    assert estimate.mfu == pytest.approx((4 * N + ATTENTION_PER_TOKEN) * estimate.tokens_per_s / peak_flops_per_s)
