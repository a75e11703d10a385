"""``kernels: liger`` priced from Liger Kernel 0.8.5's source: memory (saved tensors, the fused linear cross-entropy's
chunk and kept gradients) and time (the fused kernels' traffic in place of the eager ops), on a small config whose
numbers are derived here from the source's rules (``autotune.costmodel.fused_kernels`` cites the lines)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from autotune.costmodel.activations import logits_peak_bytes
from autotune.costmodel.calibration import default_coefficients
from autotune.costmodel.context import setting_context
from autotune.costmodel.device import device_context
from autotune.costmodel.dispatch import layer_ops
from autotune.costmodel.fused_kernels import (
    EAGER_RMSNORM_BACKWARD,
    EAGER_RMSNORM_FORWARD,
    EAGER_ROPE,
    EAGER_SWIGLU,
    NO_FUSED_KERNELS,
    eager_replaced_traffic,
    fused_kernels,
    liger_chunk_rows,
)
from autotune.costmodel.memory import predict_memory_in
from autotune.costmodel.priors import GPU_KERNEL_MIN_S
from autotune.costmodel.step_time import predict_time_in
from autotune.profiles.catalog import resolve_gpu, resolve_model_profile
from autotune.schemas import ClusterSpec, TrainingSetting, Workload
from autotune.units import GB

ROOT = Path(__file__).resolve().parents[3]
COEFFICIENTS = default_coefficients()
H100, _ = resolve_gpu("h100-80gb")
CLUSTER = ClusterSpec(gpu=H100, num_gpus_per_node=1)
H, INTER, NQ, NKV, D, V, LAYERS = 256, 512, 4, 2, 64, 4096, 2
SMALL = resolve_model_profile("llama3-8b").model_copy(
    update={
        "hidden_size": H,
        "intermediate_size": INTER,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": NQ,
        "num_key_value_heads": NKV,
        "head_dim": D,
        "vocab_size": V,
    }
)
MBS, SEQ = 2, 128
T = MBS * SEQ


def contexts(method: str = "lora", model=SMALL, **extra):
    """(kernels none, kernels liger) contexts of one bf16 setting without checkpointing."""
    out = []
    for kernels in ("none", "liger"):
        setting = TrainingSetting(
            method=method, micro_batch_size=MBS, grad_accum=1, grad_ckpt=False, kernels=kernels, **extra
        )
        out.append(setting_context(model, setting, CLUSTER, Workload(seq_len=SEQ, global_batch_size=MBS)))
    return out


def test_chunk_rows_follow_the_source_rule_and_its_own_example() -> None:
    # fused_linear_cross_entropy_forward's comment: BT = 4096*4, V = 32000, H = 4096 ==> chunk_size = 2048
    assert liger_chunk_rows(4096 * 4, 32000, 4096) == 2048
    # inc_factor = ceil(4096 / 256) = 16; ceil(256 / 16) = 16, already a power of two
    assert liger_chunk_rows(T, V, H) == 16
    assert liger_chunk_rows(3, 128256, 4096) == 1  # never more than BT; at least one row
    assert liger_chunk_rows(100, 1000, 100) == 16  # ceil(100 / 10) = 10 -> next power of two 16


def test_liger_lowers_the_logits_and_activation_memory_by_the_source_counts() -> None:
    none, liger = contexts()
    assert none.fused == NO_FUSED_KERNELS and liger.fused.rms_norm and liger.fused.swiglu and liger.fused.rope
    eager_mem, liger_mem = predict_memory_in(none, COEFFICIENTS), predict_memory_in(liger, COEFFICIENTS)
    assert eager_mem.peak_phase == liger_mem.peak_phase == "forward/backward"
    # logits: transformers' fp32-upcast loss holds 12 bytes per logit; Liger one 16-row bf16 chunk, grad_input
    # (T×h bf16) and loss_1d (T fp32); a frozen head keeps no grad_weight
    assert eager_mem.breakdown_bytes["logits + loss"] == 12 * T * V
    assert liger_mem.breakdown_bytes["logits + loss"] == 16 * V * 2 + T * H * 2 + T * 4
    # per layer and token, LoRA (frozen norms, no autocast): an eager RMSNorm saves its fp32 input (4h), Liger's
    # X (2h) + fp32 rstd (4); the eager MLP saves silu's input, silu's output and up's output (3 × 2I), Liger
    # gate and up (2 × 2I); outside the layers the final norm's 8h (fp32 copy, normalized, output) becomes 2h + 4
    per_token = LAYERS * (2 * (4 * H - (2 * H + 4)) + 2 * INTER) + (8 * H - (2 * H + 4))
    saved = eager_mem.breakdown_bytes["activations"] - liger_mem.breakdown_bytes["activations"]
    assert saved == pytest.approx(per_token * T, rel=1e-12)
    assert liger_mem.peak_allocated_bytes < eager_mem.peak_allocated_bytes


def test_a_trained_head_keeps_its_weight_gradient_from_forward() -> None:
    _, liger = contexts("full")
    # grad_weight = zeros_like(weight) (accum_dtype None): V×h in the weight's dtype, beside the LoRA case's parts
    expected = 16 * V * 2 + T * H * 2 + T * 4 + V * H * liger.dtypes.weight_bytes
    assert logits_peak_bytes(SMALL, liger.setting, liger.dtypes, T, liger.fused) == expected


def test_liger_element_wise_time_is_the_eager_ops_out_and_the_fused_traffic_in() -> None:
    none, liger = contexts()
    eager_t, liger_t = (
        predict_time_in(none, COEFFICIENTS, device_context(none.gpu, COEFFICIENTS)),
        predict_time_in(liger, COEFFICIENTS, device_context(liger.gpu, COEFFICIENTS)),
    )
    bandwidth = H100.memory_bandwidth_gb_per_s * GB * COEFFICIENTS.bandwidth_efficiency
    qk = NQ * D + NKV * D
    # eager (bf16, counted; frozen norm weights): 2 RMSNorms, silu·mul, apply_rotary_pos_emb
    eager_fwd = 2 * (36 * H + 24) + 10 * INTER + (18 * qk + 8 * D)
    eager_bwd = 2 * (88 * H + 36) + 18 * INTER + (32 * qk + 8 * D)
    # Liger, from its kernels' loads and stores (bf16 tensors, fp32 rstd):
    # RMSNorm fwd X, Y, rstd / bwd dY, X, rstd, dX; SwiGLU fwd a, b, c / bwd dc, a, b, da, db; RoPE q, k in and
    # out + cos, sin left halves, each pass
    liger_fwd = 2 * (2 * 2 * H + 4) + 3 * 2 * INTER + (2 * 2 * qk + 2 * D)
    liger_bwd = 2 * (3 * 2 * H + 4) + 5 * 2 * INTER + (2 * 2 * qk + 2 * D)
    # kernels: eager 2·8 + 2 + 10 forward, 2·14 + 3 + 16 backward; Liger one per module and pass
    kernels_out = (2 * 8 + 2 + 10) + (2 * 14 + 3 + 16)
    kernels_in = 4 + 4
    expected = LAYERS * (
        (liger_fwd + liger_bwd - eager_fwd - eager_bwd) * T / bandwidth + (kernels_in - kernels_out) * GPU_KERNEL_MIN_S
    )
    assert liger_t.terms.elementwise_s - eager_t.terms.elementwise_s == pytest.approx(expected, rel=1e-9)
    assert liger_t.terms.elementwise_s < eager_t.terms.elementwise_s
    for terms_name in ("gemm_s", "attention_s", "lora_adapters_s", "optimizer_step_s"):
        assert getattr(liger_t.terms, terms_name) == getattr(eager_t.terms, terms_name)


def test_the_terms_still_sum_to_the_step_time() -> None:
    for method in ("lora", "full", "qlora"):
        for context in contexts(method):
            timing = predict_time_in(context, COEFFICIENTS, device_context(context.gpu, COEFFICIENTS))
            assert timing.terms.total_s() == pytest.approx(timing.step_time_s, rel=1e-12)


def test_the_fused_head_runs_its_gemms_per_chunk_and_reads_each_logit_three_times() -> None:
    from autotune.costmodel.device import build_device_context
    from autotune.costmodel.gemm import linear_pass_time_s
    from autotune.costmodel.priors import HEAD_KERNELS_PER_MICRO_STEP

    _, liger = contexts()
    timing = predict_time_in(liger, COEFFICIENTS, device_context(liger.gpu, COEFFICIENTS))
    device = build_device_context(H100, COEFFICIENTS).matmul["bf16"]
    chunks = T // 16
    gemm = chunks * (
        linear_pass_time_s(16, H, V, 2, device, "forward") + linear_pass_time_s(16, H, V, 2, device, "input-grad")
    )
    bandwidth = H100.memory_bandwidth_gb_per_s * GB * COEFFICIENTS.bandwidth_efficiency
    # CE kernel: 3 logit accesses × 2 bytes; grad_input zero-filled, then read and written by element_mul
    traffic = (3 * 2 * T * V + 3 * T * H * 2) / bandwidth
    kernels = HEAD_KERNELS_PER_MICRO_STEP + chunks * 3 + 2
    assert timing.terms.lm_head_loss_s == pytest.approx(gemm + traffic + kernels * GPU_KERNEL_MIN_S, rel=1e-9)


def test_nothing_but_the_head_is_fused_on_a_layernorm_block() -> None:
    pythia = resolve_model_profile("llama3-8b").model_copy(
        update={"norm_type": "layernorm", "mlp_gated": False, "hidden_act": "gelu", "num_hidden_layers": 2}
    )
    none, liger = contexts(model=pythia)
    assert not (liger.fused.rms_norm or liger.fused.swiglu or liger.fused.rope) and liger.fused.linear_cross_entropy
    eager_t, liger_t = (
        predict_time_in(none, COEFFICIENTS, device_context(none.gpu, COEFFICIENTS)),
        predict_time_in(liger, COEFFICIENTS, device_context(liger.gpu, COEFFICIENTS)),
    )
    assert liger_t.terms.elementwise_s == eager_t.terms.elementwise_s
    assert liger_t.terms.lm_head_loss_s != eager_t.terms.lm_head_loss_s


@pytest.mark.parametrize("name", ["llama3-8b", "llama2-7b", "mistral-7b", "qwen2.5-7b", "gemma-7b", "phi3-mini"])
def test_the_replaced_ops_are_part_of_the_counted_layer(name: str) -> None:
    # what Liger removes comes out of op_counts.yaml's whole-layer count: for a Llama / Qwen2 layer exactly the two
    # residual adds are left of the forward's element-wise kernels; bytes stay positive for every family
    model = resolve_model_profile(name)
    for method in ("lora", "full"):
        trained = method == "full"
        fused = fused_kernels(model, TrainingSetting(method=method, kernels="liger"))
        ops, eager = layer_ops(model, trained), eager_replaced_traffic(model, fused, trained)
        assert ops.forward_bytes_per_token - eager.forward_bytes_per_token > 0
        assert ops.backward_bytes_per_token - eager.backward_bytes_per_token > 0
        assert ops.backward_elementwise_kernels - eager.backward_kernels > 0
        if fused.swiglu:
            assert ops.forward_elementwise_kernels - eager.forward_kernels == 2


def _counting_mode():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    spec = importlib.util.spec_from_file_location("count_ops", ROOT / "tools" / "count_ops.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["count_ops"] = module
    spec.loader.exec_module(module)
    return module.CountingMode


def _count(fn, *inputs):
    import torch

    mode = _counting_mode()
    with mode() as forward:
        out = fn(*inputs)
    outs = out if isinstance(out, tuple) else (out,)
    grads = [torch.ones_like(o) for o in outs]
    with mode() as backward:
        torch.autograd.backward(outs, grads)
    return forward.tally, backward.tally


@pytest.mark.parametrize("hidden", [64, 192])
@pytest.mark.parametrize("trained", [False, True])
def test_the_eager_rmsnorm_counts_are_what_transformers_runs(hidden: int, trained: bool) -> None:
    _counting_mode()
    import torch
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    norm = LlamaRMSNorm(hidden).to(torch.bfloat16)
    norm.weight.requires_grad_(trained)
    x = torch.randn(2, 32, hidden, dtype=torch.bfloat16, requires_grad=True)
    forward, backward = _count(norm, x)
    tokens = 64
    # the weight (h elements per call, 2 bytes; its gradient too when trained) is not per token
    per_call = 2 * hidden
    fwd_h, fwd_c = EAGER_RMSNORM_FORWARD
    bwd_h, bwd_c = EAGER_RMSNORM_BACKWARD[trained]
    assert forward.elementwise_bytes == tokens * (fwd_h * hidden + fwd_c) + per_call
    assert backward.elementwise_bytes == tokens * (bwd_h * hidden + bwd_c) + per_call * (2 if trained else 1)
    assert (forward.elementwise, backward.elementwise) == (8, 16 if trained else 14)


def test_the_eager_swiglu_and_rope_counts_are_what_transformers_runs() -> None:
    _counting_mode()
    import torch
    import torch.nn.functional as F
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    bf16, tokens, inter = torch.bfloat16, 64, 160
    gate = torch.randn(2, 32, inter, dtype=bf16, requires_grad=True)
    up = torch.randn(2, 32, inter, dtype=bf16, requires_grad=True)
    forward, backward = _count(lambda g, u: F.silu(g) * u, gate, up)
    fwd_i, bwd_i, fwd_k, bwd_k = EAGER_SWIGLU
    assert (forward.elementwise_bytes, backward.elementwise_bytes) == (tokens * fwd_i * inter, tokens * bwd_i * inter)
    assert (forward.elementwise, backward.elementwise) == (fwd_k, bwd_k)

    nq, nkv, d = 8, 2, 32
    q_proj = torch.randn(2, 32, nq * d, dtype=bf16, requires_grad=True)
    k_proj = torch.randn(2, 32, nkv * d, dtype=bf16, requires_grad=True)
    cos, sin = torch.randn(2, 32, d, dtype=bf16), torch.randn(2, 32, d, dtype=bf16)

    def rope(qp: torch.Tensor, kp: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # as LlamaAttention calls it: projections viewed (b, s, n, d) and transposed to (b, n, s, d)
        q = qp.view(2, 32, nq, d).transpose(1, 2)
        k = kp.view(2, 32, nkv, d).transpose(1, 2)
        return apply_rotary_pos_emb(q, k, cos, sin)

    forward, backward = _count(rope, q_proj, k_proj)
    fwd_qk, fwd_d, bwd_qk, bwd_d, fwd_k, bwd_k = EAGER_ROPE
    qk = (nq + nkv) * d
    assert forward.elementwise_bytes == tokens * (fwd_qk * qk + fwd_d * d)
    assert backward.elementwise_bytes == tokens * (bwd_qk * qk + bwd_d * d)
    assert (forward.elementwise, backward.elementwise) == (fwd_k, bwd_k)
