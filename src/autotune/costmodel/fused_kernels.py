"""What ``kernels: liger`` changes in memory and time, read from Liger Kernel's source.

The kernels are Liger Kernel's fused RMSNorm, SwiGLU, RoPE and fused linear cross-entropy, read from its source
(liger-kernel 0.8.5, the version the training core's ``liger`` extra pins), and the eager transformers ops they replace,
counted.

The training core applies ``_apply_liger_kernel_to_instance(rope=True, rms_norm=True, swiglu=True,
cross_entropy=False, fused_linear_cross_entropy=True)`` (``autotune.trainer.kernels``). Per kernel, from
``liger_kernel/ops/*.py`` (E = bytes per element of the tensor named; per token unless stated):

* **RMSNorm** — ``rms_norm.py``: ``LigerRMSNormFunction.forward`` saves ``X`` (the input, its own dtype) and
  ``RSTD`` (fp32, one per row: ``rms_norm_forward``); no fp32 copy and no normalized copy.
  ``_rms_norm_forward_kernel`` reads X, W and writes Y, RSTD: 2·E·h + 4. ``_rms_norm_backward_kernel`` reads dY,
  X, RSTD, W and writes dX (into dY, ``in_place``): 3·E·h + 4; a trained weight (``needs_dw =
  ctx.needs_input_grad[1]``) adds fp32 per-SM partials (per call, not per token) summed and cast by two more
  kernels (``rms_norm_backward``: ``_dW.sum(dim=0).to(W.dtype)``).
* **SwiGLU** — ``swiglu.py``: ``LigerSiLUMulFunction.forward`` saves ``a`` (gate output) and ``b`` (up output);
  silu is recomputed in ``_swiglu_backward_kernel`` ("recomputation to save memory"), whose dA and dB overwrite
  a and b in place. Forward reads a, b, writes c: 3·E·I; backward reads dc, a, b, writes da, db: 5·E·I; one
  kernel each. The recompute is a sigmoid per element inside the same memory-bound kernel: no extra traffic.
* **RoPE** — ``rope.py``: ``LigerRopeFunction`` rotates q and k in place (``_triton_rope``; ``rope_forward``'s
  ``.contiguous()`` is a no-op on the projections' (b, s, n, d) storage) and saves cos, sin (shared by the
  batch, not per token). Each pass reads and writes q and k and reads the left halves of cos and sin: 2·E·(n_q·d
  + n_kv·d) + E·d; one kernel each. The backward assumes the attention kernel returns dq, dk in q's layout
  (flash / memory-efficient SDPA allocate them ``empty_like``), so its ``.contiguous()`` copies nothing.
* **Fused linear cross-entropy** — ``fused_linear_cross_entropy.py``: ``fused_linear_cross_entropy_forward``
  never materialises the T×V logits. It takes ``chunk = min(next_pow2(ceil(T / ceil(V / h))), T)`` rows at a
  time (``chunk_mem_const`` 1: transient logits ≈ T·h elements), computes the chunk's logits into one reused
  buffer (``logits_storage``, the input dtype; ``torch.mm(..., out=)`` since grad mode is off inside the
  autograd function), runs ``liger_cross_entropy_kernel`` (``cross_entropy.py``: one pass reads the row for the
  online max / sum, a second reads it again and writes the gradient over it: 3 bytes-of-logit per logit), then
  ``grad_input[chunk] = grad_logits @ W`` and, when the head trains, ``grad_weight += grad_logitsᵀ @ X`` (addmm
  into a V×h accumulator in the weight's dtype). Forward keeps ``grad_input`` (T×h, input dtype), ``grad_weight``
  and ``loss_1d`` (T fp32) for backward (``ctx.save_for_backward``), which only scales them by the upstream
  gradient (``element_mul_kernel``; the Trainer's ``num_items_in_batch`` makes it ≠ 1). So the head's GEMMs all
  run in the forward pass, per chunk, and the logits part of memory is one chunk's logits plus the stored
  gradients. ``liger_kernel/transformers/model/llama.py`` ``lce_forward`` calls it whenever the model trains
  with labels (``skip_logits``).

The eager side is counted like ``tools/count_ops.py`` counts a layer (every element-wise aten op moves its
tensor inputs and outputs, bf16): transformers 5.23.0 ``LlamaRMSNorm``, ``act_fn(gate) * up`` and
``apply_rotary_pos_emb`` run alone under that script's ``CountingMode`` (``tests/unit/costmodel/test_fused_kernels.py``
recounts them when torch is installed); other families' RMSNorm and rotary code (Gemma's ``1 + weight``, Qwen2,
Phi-3) are taken as Llama's. Not priced (kept as without Liger): GeGLU MLPs (Gemma), a fused gate_up
projection (Phi-3), MoE experts, LayerNorm blocks and ALiBi models; the host sync of
``target_mask.sum().item()`` once per micro-step. Unmeasured on a GPU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from autotune.costmodel.gemm import GemmDevice, linear_pass_time_s
from autotune.costmodel.precision import DtypeBytes
from autotune.schemas.model import ModelSpec
from autotune.schemas.setting import TrainingSetting

FP32_BYTES = 4.0
SWIGLU_ACTS = ("silu", "swish")
"""Activations whose gated MLP Liger's ``LigerSwiGLUMLP`` replaces (``liger_kernel/transformers/swiglu.py``)."""
NO_ROPE_NORM_TYPES = ("layernorm", "low_precision_layernorm")
"""Norm types of the GPT-style blocks (LayerNorm; learned, partial-rotary or ALiBi positions) where neither Liger's
RMSNorm nor its Llama RoPE applies."""


@dataclass(frozen=True)
class FusedKernels:
    """Which of a layer's modules run fused kernels for one setting (all False for ``kernels: none``).

    Attributes:
        rms_norm: Liger's RMSNorm replaces every RMSNorm (decoder layers and the final norm).
        swiglu: Liger's SiLU·mul replaces the gated MLP's activation and product.
        rope: Liger's RoPE replaces ``apply_rotary_pos_emb``.
        linear_cross_entropy: Liger's fused linear cross-entropy replaces lm_head + loss.
    """

    rms_norm: bool = False
    swiglu: bool = False
    rope: bool = False
    linear_cross_entropy: bool = False

    @property
    def any(self) -> bool:
        """True when at least one module is fused."""
        return self.rms_norm or self.swiglu or self.rope or self.linear_cross_entropy


NO_FUSED_KERNELS = FusedKernels()


def fused_kernels(model: ModelSpec, setting: TrainingSetting) -> FusedKernels:
    """The modules ``setting.kernels`` fuses on ``model`` (module docstring lists what is not priced)."""
    if setting.kernels != "liger":
        return NO_FUSED_KERNELS
    llama_block = model.norm_type not in NO_ROPE_NORM_TYPES
    swiglu = (
        llama_block
        and model.mlp_gated
        and model.hidden_act in SWIGLU_ACTS
        and not model.fused_gate_up
        and model.num_experts == 1
    )
    return FusedKernels(rms_norm=llama_block, swiglu=swiglu, rope=llama_block, linear_cross_entropy=True)


@dataclass(frozen=True)
class Traffic:
    """Element-wise bytes per token and kernel launches of a layer's forward and backward (one group of ops)."""

    forward_bytes_per_token: float = 0.0
    backward_bytes_per_token: float = 0.0
    forward_kernels: float = 0.0
    backward_kernels: float = 0.0

    def __add__(self, other: Traffic) -> Traffic:
        """Sum two groups of ops: bytes and kernels added field by field."""
        return Traffic(
            self.forward_bytes_per_token + other.forward_bytes_per_token,
            self.backward_bytes_per_token + other.backward_bytes_per_token,
            self.forward_kernels + other.forward_kernels,
            self.backward_kernels + other.backward_kernels,
        )


# Eager transformers ops (bf16, counted: module docstring). Bytes per token per module call.
EAGER_RMSNORM_FORWARD = (36.0, 24.0)
"""(bytes per h, constant) of ``LlamaRMSNorm.forward``: ``_to_copy`` fp32 (6h), ``pow`` (8h), ``mean`` (4h + 4),
``add`` eps (8), ``rsqrt`` (8), ``mul`` (8h + 4), ``_to_copy`` bf16 (6h), weight ``mul`` (4h): 8 kernels."""
EAGER_RMSNORM_BACKWARD = {False: (88.0, 36.0), True: (96.0, 36.0)}
"""(bytes per h, constant) of its backward, frozen / trained weight: 14 / 16 kernels."""
EAGER_RMSNORM_KERNELS = (8, {False: 14, True: 16})
EAGER_SWIGLU = (10.0, 18.0, 2, 3)
"""``act_fn(gate) * up``: forward ``silu`` + ``mul`` 10 bytes per I, backward ``mul`` ×2 + ``silu_backward`` 18 bytes
per I; 2 and 3 kernels."""
EAGER_ROPE = (18.0, 8.0, 32.0, 8.0, 10, 16)
"""``apply_rotary_pos_emb``: forward 18 bytes per q/k element + 8 per head_dim (cos, sin read four times: ``mul`` ×4,
``neg`` ×2, ``cat`` ×2, ``add`` ×2), backward 32 + 8 (incl. the two ``clone``s of dq / dk the projections' views
need); 10 and 16 kernels."""


def eager_replaced_traffic(model: ModelSpec, fused: FusedKernels, trainable: bool) -> Traffic:
    """The eager ops of one decoder layer that ``fused`` replaces, bf16 basis.

    The basis of ``dispatch.layer_ops``, scaled by the caller like the rest of the layer's traffic.
    """
    h, inter = model.hidden_size, model.intermediate_size
    total = Traffic()
    if fused.rms_norm:
        norms = model.norms_per_layer
        fwd, bwd = EAGER_RMSNORM_FORWARD, EAGER_RMSNORM_BACKWARD[trainable]
        fwd_kernels, bwd_kernels = EAGER_RMSNORM_KERNELS
        total += Traffic(
            norms * (fwd[0] * h + fwd[1]),
            norms * (bwd[0] * h + bwd[1]),
            norms * fwd_kernels,
            norms * bwd_kernels[trainable],
        )
    if fused.swiglu:
        fwd_i, bwd_i, fwd_k, bwd_k = EAGER_SWIGLU
        total += Traffic(fwd_i * inter, bwd_i * inter, fwd_k, bwd_k)
    if fused.rope:
        fwd_qk, fwd_d, bwd_qk, bwd_d, fwd_k, bwd_k = EAGER_ROPE
        qk, d = model.q_dim + model.kv_dim, model.head_dim
        total += Traffic(fwd_qk * qk + fwd_d * d, bwd_qk * qk + bwd_d * d, fwd_k, bwd_k)
    return total


def liger_layer_traffic(model: ModelSpec, fused: FusedKernels, dtypes: DtypeBytes, trainable: bool) -> Traffic:
    """Bytes per token and kernels of one decoder layer's Liger kernels, in the tensors' own dtypes.

    See the module docstring: RMSNorm on the residual stream, SwiGLU and RoPE on the compute dtype.
    """
    s_b, c_b = dtypes.residual_bytes, dtypes.compute_bytes
    h, inter = model.hidden_size, model.intermediate_size
    total = Traffic()
    if fused.rms_norm:
        norms = model.norms_per_layer
        total += Traffic(
            norms * (2 * s_b * h + FP32_BYTES),
            norms * (3 * s_b * h + FP32_BYTES),
            norms * 1,
            norms * (3 if trainable else 1),
        )
    if fused.swiglu:
        total += Traffic(3 * c_b * inter, 5 * c_b * inter, 1, 1)
    if fused.rope:
        per_pass = 2 * c_b * (model.q_dim + model.kv_dim) + c_b * model.head_dim
        total += Traffic(per_pass, per_pass, 1, 1)
    return total


def liger_norm_saved_bytes(dtypes: DtypeBytes) -> tuple[float, float]:
    """(bytes per element of h, bytes per token) one Liger RMSNorm saves: X in the residual dtype and the fp32 RSTD.

    See ``LigerRMSNormFunction.forward``: ``ctx.save_for_backward(X, W, RSTD)``.
    """
    return dtypes.residual_bytes, FP32_BYTES


def liger_swiglu_saved_bytes(dtypes: DtypeBytes) -> float:
    """Bytes per element of I that ``LigerSiLUMulFunction`` saves: a and b (``ctx.save_for_backward(a, b)``)."""
    return 2 * dtypes.compute_bytes


def liger_chunk_rows(tokens: float, vocab: int, hidden: int) -> int:
    """Rows per chunk of the fused linear cross-entropy.

    From ``fused_linear_cross_entropy_forward``: ``inc_factor = cdiv(V, chunk_mem_const · H)``, ``chunk_size =
    min(next_power_of_2(cdiv(BT, inc_factor)), BT)``, ``chunk_mem_const`` 1.
    """
    rows = max(1, math.ceil(tokens))
    inc_factor = math.ceil(vocab / hidden)
    chunk = 2 ** math.ceil(math.log2(math.ceil(rows / inc_factor)))
    return min(chunk, rows)


def liger_loss_peak_bytes(
    model: ModelSpec, setting: TrainingSetting, dtypes: DtypeBytes, tokens: float, logit_bytes: float
) -> float:
    """Peak bytes of the fused linear cross-entropy for ``tokens`` tokens (module docstring).

    One chunk's logits (``logit_bytes`` each), ``grad_input`` (T×h, residual dtype), ``loss_1d`` (T fp32) and, when the
    head trains, ``grad_weight`` (V×h, the weight's dtype: ``accum_dtype`` None). All but the chunk stay until backward.
    """
    rows = liger_chunk_rows(tokens, model.vocab_size, model.hidden_size)
    peak = rows * model.vocab_size * logit_bytes + tokens * (model.hidden_size * dtypes.residual_bytes + FP32_BYTES)
    if not setting.uses_adapters:
        peak += model.vocab_size * model.hidden_size * dtypes.weight_bytes
    return peak


LIGER_CE_BYTES_PER_LOGIT = 3
"""Logit-sized accesses of ``liger_cross_entropy_kernel`` per logit: the online-softmax pass reads it, the
gradient pass reads it again and writes the gradient over it (``cross_entropy.py``)."""
LIGER_HEAD_KERNELS_PER_CHUNK = 3
"""Launches per chunk: the logits ``mm``, the cross-entropy kernel, the ``grad_input`` ``mm`` (+1: the
``grad_weight`` ``addmm`` when the head trains)."""


@dataclass(frozen=True)
class HeadWork:
    """The fused linear cross-entropy's work per micro-step: GEMM seconds, element-wise bytes, kernel launches."""

    gemm_s: float
    elementwise_bytes: float
    kernels: float


def liger_head_work(
    model: ModelSpec,
    setting: TrainingSetting,
    dtypes: DtypeBytes,
    tokens: float,
    logit_bytes: float,
    device: GemmDevice,
) -> HeadWork:
    """lm_head + loss under Liger's fused linear cross-entropy for ``tokens`` tokens (module docstring).

    Per chunk of ``liger_chunk_rows`` rows: the logits GEMM (rows × V × h) and the ``grad_input`` GEMM (rows × h ×
    V), and with a trained head the ``grad_weight`` addmm (V × h × rows), which also reads the V×h accumulator
    back. Element-wise: the cross-entropy kernel (``LIGER_CE_BYTES_PER_LOGIT`` per logit), the zero-filled
    ``grad_input`` (and ``grad_weight``), and the backward's ``element_mul_kernel`` reading and writing them once.
    All GEMMs run in the forward pass; none is left for backward.
    """
    h, vocab = model.hidden_size, model.vocab_size
    trained = not setting.uses_adapters
    rows = liger_chunk_rows(tokens, vocab, h)
    full_chunks, last_rows = divmod(max(1.0, tokens), rows)
    chunks = [(rows, full_chunks)] + ([(last_rows, 1.0)] if last_rows > 0 else [])
    gemm_s = 0.0
    for chunk_rows, count in chunks:
        per_chunk = linear_pass_time_s(chunk_rows, h, vocab, logit_bytes, device, "forward")
        per_chunk += linear_pass_time_s(chunk_rows, h, vocab, logit_bytes, device, "input-grad")
        if trained:
            per_chunk += linear_pass_time_s(chunk_rows, h, vocab, logit_bytes, device, "weight-grad")
            per_chunk += vocab * h * dtypes.weight_bytes / device.bytes_per_s  # addmm reads the accumulator
        gemm_s += count * per_chunk
    grad_input_bytes = tokens * h * dtypes.residual_bytes
    grad_weight_bytes = vocab * h * dtypes.weight_bytes if trained else 0.0
    elementwise = LIGER_CE_BYTES_PER_LOGIT * logit_bytes * tokens * vocab + 3 * (grad_input_bytes + grad_weight_bytes)
    kernels = sum(count for _, count in chunks) * (LIGER_HEAD_KERNELS_PER_CHUNK + int(trained))
    kernels += 2 * (1 + int(trained))  # zero fills and the backward's element_mul
    return HeadWork(gemm_s=gemm_s, elementwise_bytes=elementwise, kernels=kernels)
