"""One decoder layer's forward and backward pass, term by term (docs/cost-model.md §5; ``step_time`` composes them).

Each term is one function returning a :class:`PassWork` (forward and backward :class:`TermWork`: GPU seconds,
kernels, CPU seconds beyond kernels); :func:`layer_passes` gathers them into two :class:`LayerPass` records. Every
term's GPU seconds include its kernels' ``priors.GPU_KERNEL_MIN_S`` (launch latency, ramp and tail).

* **GEMMs** (:func:`gemm_term`) — every ``nn.Linear`` of a decoder layer (``SettingContext.linear_modules``) as its
  forward, input-gradient and (when the weight trains) weight-gradient GEMM, timed by ``gemm.linear_pass_time_s``
  from its shape (M = tokens per micro-step; MoE experts see their share of the tokens); checkpointing adds one
  forward (Narayanan et al. 2021, eq. 3; ``step_time``). Kernel counts from the op counts (``dispatch.layer_ops``).
* **attention** (:func:`attention_term`) — ``gemm.attention_flops_forward`` (causal saving only for flash /
  memory-efficient kernels), backward ``FLASH_BACKWARD_FLOPS_RATIO`` × (flash) or 2× (math), at the attention
  efficiency of the GPU's architecture; the Triton flash kernel of the 2023 MPT measurements (``flash-triton``)
  takes ``priors.TRITON_FLASH_ATTENTION_TIME_RATIO`` × as long. Micro batches that give SDPA an explicit mask
  (``SettingContext.masked_attention_share``: packed rows of several examples, padded rows of different lengths) run
  the memory-efficient kernel over all s² scores (no causal saving) at ``priors.MEM_EFFICIENT_ATTENTION_TIME_RATIO``
  × flash's time; flash-attention-2 on flattened packed rows attends over Σ lᵢ² / Σ lᵢ keys per token
  (``SettingContext.attention_span_tokens``) instead of seq_len.
* **element-wise** (:func:`elementwise_term`) — the bytes the layer's non-GEMM kernels move, counted from the real
  module code (``dispatch.layer_ops``; bf16 basis, scaled by the residual dtype), at the achievable bandwidth;
  torch.compile removes ``compile_speedup`` of the traffic and kernels; fused kernels (``kernels: liger``) take
  the eager ops they replace out and add their own traffic (``fused_kernels``); the math attention path adds its
  score traffic (``dispatch.eager_attention``, ``LEGACY_CLAMP``); the masked SDPA path adds its mask conversion and
  k / v repeats (:func:`masked_sdpa_extras`).
* **LoRA** (:func:`lora_term`) and **QLoRA** (:func:`dequant_term`) — counted from what peft and bitsandbytes run
  (``adapter_time``, ``param_adapters``); peft's Python per target (``lora_target_cpu_s``) and bitsandbytes'
  per Linear4bit (``qlora_linear_cpu_s``) are CPU seconds beyond the kernels.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import NamedTuple

from autotune.costmodel.adapter_time import (
    dequant_per_layer_pass,
    lora_elementwise,
    lora_gemm_s,
    lora_ops,
    targets_per_layer,
)
from autotune.costmodel.context import SettingContext, has_flash_attention_2
from autotune.costmodel.device import FP32_SIMT, DeviceContext
from autotune.costmodel.dispatch import LEGACY_CLAMP, LayerOps, eager_attention, layer_ops
from autotune.costmodel.fp8_time import fp8_layer_gemm_s
from autotune.costmodel.fused_kernels import eager_replaced_traffic, liger_layer_traffic
from autotune.costmodel.gemm import GemmDevice, attention_flops_forward, attention_time_s, linear_pass_time_s
from autotune.costmodel.param_adapters import wrapped_gemm_s
from autotune.costmodel.params import LinearModule, layer_linear_tokens
from autotune.costmodel.precision import DtypeBytes
from autotune.costmodel.priors import (
    FLASH_BACKWARD_FLOPS_RATIO,
    GPU_KERNEL_MIN_S,
    MEM_EFFICIENT_ATTENTION_TIME_RATIO,
    TRITON_FLASH_ATTENTION_TIME_RATIO,
)
from autotune.schemas.calibration import CostCoefficients
from autotune.schemas.model import ModelSpec

MATH_ATTENTION_BACKWARD_FACTOR = 2.0
"""Math (eager) attention backward: two GEMMs per forward GEMM (input gradients of QKᵀ and PV)."""


class TermWork(NamedTuple):
    """One term's work in one pass of one decoder layer (a named tuple: built ten times per candidate).

    Attributes:
        gpu_s: GPU seconds, its kernels' ``GPU_KERNEL_MIN_S`` included.
        kernels: kernels launched (fractional: torch.compile fuses a share of them).
        python_cpu_s: CPU seconds of Python calls beyond their kernels (peft's targets, bitsandbytes' Linear4bit).
    """

    gpu_s: float = 0.0
    kernels: float = 0.0
    python_cpu_s: float = 0.0


NO_WORK = TermWork()
"""A term the setting does not have."""


class PassWork(NamedTuple):
    """One term's work in a layer's forward and backward pass."""

    forward: TermWork
    backward: TermWork


NO_PASS_WORK = PassWork(NO_WORK, NO_WORK)
"""A term absent from both passes."""


@dataclass(frozen=True)
class LayerPass:
    """One decoder layer's pass (forward or backward), term by term (``TimeTerms`` names the same terms)."""

    gemm: TermWork
    attention: TermWork
    elementwise: TermWork
    lora_adapters: TermWork = NO_WORK
    qlora_dequant: TermWork = NO_WORK

    def gpu_s(self) -> float:
        """GPU seconds of the pass: the terms in field order."""
        return (
            self.gemm.gpu_s
            + self.attention.gpu_s
            + self.elementwise.gpu_s
            + self.lora_adapters.gpu_s
            + self.qlora_dequant.gpu_s
        )

    def kernels(self) -> float:
        """Kernels the pass launches."""
        return (
            self.gemm.kernels
            + self.attention.kernels
            + self.elementwise.kernels
            + self.lora_adapters.kernels
            + self.qlora_dequant.kernels
        )

    def python_cpu_s(self) -> float:
        """CPU seconds beyond the kernels (adapters' and Linear4bit's Python)."""
        return self.lora_adapters.python_cpu_s + self.qlora_dequant.python_cpu_s


@functools.lru_cache(maxsize=4096)
def layer_gemm_s(
    modules: tuple[LinearModule, ...],
    layers: int,
    experts: tuple[int, int],
    tokens: float,
    element_bytes: float,
    device: GemmDevice,
    trainable: bool,
) -> tuple[float, float]:
    """(forward, backward) seconds of one decoder layer's ``modules`` GEMMs by shape (module docstring).

    ``layers``: the model's decoder layers; ``experts``: (experts per token, experts), MoE experts see their share of
    the tokens. Cached (on plain values: candidates repeat the same shapes).
    """
    forward = backward = 0.0
    for m, per_layer, m_tokens in layer_linear_tokens(modules, layers, experts, tokens):
        shape = (m_tokens, m.in_features, m.out_features, element_bytes, device)
        forward += per_layer * linear_pass_time_s(*shape, "forward")
        backward += per_layer * linear_pass_time_s(*shape, "input-grad")
        if trainable:
            backward += per_layer * linear_pass_time_s(*shape, "weight-grad")
    return forward, backward


def gemm_term(context: SettingContext, device: DeviceContext, ops: LayerOps) -> PassWork:
    """The layer's ``nn.Linear`` GEMMs in the compute dtype (weight gradients when the weights train).

    FP8 linears (``setting.fp8``): at the FP8 rate with their casts (``fp8_time.fp8_layer_gemm_s``).
    """
    dtypes = context.dtypes
    trained = not context.setting.uses_adapters
    matmul = device.matmul[dtypes.compute_dtype]
    model = context.model
    experts = (model.num_experts_per_token, model.num_experts)
    if context.setting.fp8:
        fwd, bwd = fp8_layer_gemm_s(context.linear_modules, context.layers, experts, context.tokens, matmul, trained)
    else:
        fwd, bwd = layer_gemm_s(
            context.linear_modules, context.layers, experts, context.tokens, dtypes.compute_bytes, matmul, trained
        )
    fwd_kernels, bwd_kernels = ops.forward_gemm_kernels, ops.backward_gemm_kernels
    return PassWork(
        TermWork(fwd + fwd_kernels * GPU_KERNEL_MIN_S, fwd_kernels),
        TermWork(bwd + bwd_kernels * GPU_KERNEL_MIN_S, bwd_kernels),
    )


def attention_term(context: SettingContext, device: DeviceContext, ops: LayerOps) -> PassWork:
    """The attention kernel: flash (causal half skipped) or math, at the GPU's attention efficiency.

    Flattened packed rows (flash-attention-2) attend over ``attention_span_tokens`` keys per token. The share of
    micro batches that run the masked SDPA path (``masked_attention_share``) computes every one of the s² scores
    (no causal skipping) on the memory-efficient kernel, ``MEM_EFFICIENT_ATTENTION_TIME_RATIO`` × flash's time for
    the same FLOPs, forward and backward, on GPUs with FlashAttention-2 (``context.has_flash_attention_2``; on
    Turing / Volta the mask-free call runs the memory-efficient kernel too, so only the causal saving is lost).
    """
    model, flash, seq = context.model, context.flash_attention, context.seq_tokens
    heads, head_dim = model.num_attention_heads, model.head_dim
    attention_device = device.attention_device(context.dtypes)
    keys = context.attention_span_tokens if context.attention_span_tokens is not None else seq
    flops = attention_flops_forward(context.tokens, keys, heads, head_dim, causal_skipped=flash)
    fwd = attention_time_s(flops, keys, attention_device)
    if context.setting.attention_impl == "flash-triton":  # same FLOPs and causal saving, a slower kernel (fwd + bwd)
        fwd *= TRITON_FLASH_ATTENTION_TIME_RATIO
    share = context.masked_attention_share
    if share > 0:
        masked_flops = attention_flops_forward(context.tokens, seq, heads, head_dim, causal_skipped=False)
        masked = attention_time_s(masked_flops, seq, attention_device)
        if has_flash_attention_2(context.gpu):  # the mask costs the flash kernel; before Ampere there was none to lose
            masked *= MEM_EFFICIENT_ATTENTION_TIME_RATIO
        fwd = (1 - share) * fwd + share * masked
    bwd = fwd * (FLASH_BACKWARD_FLOPS_RATIO if flash else MATH_ATTENTION_BACKWARD_FACTOR)
    fwd_kernels, bwd_kernels = ops.forward_attention_kernels, ops.backward_attention_kernels
    return PassWork(
        TermWork(fwd + fwd_kernels * GPU_KERNEL_MIN_S, fwd_kernels),
        TermWork(bwd + bwd_kernels * GPU_KERNEL_MIN_S, bwd_kernels),
    )


class MaskedSdpaExtras(NamedTuple):
    """What the masked SDPA path adds to a layer's element-wise work: bytes per token and kernels, per pass."""

    forward_bytes_per_token: float
    backward_bytes_per_token: float
    forward_kernels: int
    backward_kernels: int


def masked_sdpa_extras(model: ModelSpec, dtypes: DtypeBytes, seq_tokens: float) -> MaskedSdpaExtras:
    """Element-wise work of one layer's SDPA call with an explicit mask, beyond the mask-free call.

    * The mask: torch's ``scaled_dot_product_attention`` converts the boolean (b, 1, s, s) mask into an additive
      one in the query's dtype on every call (``attention.cpp`` ``convert_boolean_attn_mask``:
      ``at::where(mask, 0, -inf)``), one kernel reading 1 byte and writing m bytes per score of one head:
      (1 + m)·s bytes per token.
    * The k / v repeats (grouped heads only): transformers repeats k and v to every query head (``repeat_kv``,
      ``expand`` + ``reshape``: a copy reading n_kv·d and writing n_q·d elements per token, two kernels); the
      backward sums the repeated gradients back (``expand``'s backward, the same bytes, two kernels).
    """
    m = dtypes.compute_bytes
    grouped = model.num_key_value_heads < model.num_attention_heads
    repeat_bytes = 2 * (model.q_dim + model.kv_dim) * m if grouped else 0.0
    repeat_kernels = 2 if grouped else 0
    return MaskedSdpaExtras(
        forward_bytes_per_token=(1 + m) * seq_tokens + repeat_bytes,
        backward_bytes_per_token=repeat_bytes,
        forward_kernels=1 + repeat_kernels,
        backward_kernels=repeat_kernels,
    )


def elementwise_term(context: SettingContext, device: DeviceContext, ops: LayerOps, compile_keep: float) -> PassWork:
    """The layer's non-GEMM kernels: counted traffic, fused kernels' own, math attention's scores."""
    model, setting, dtypes, tokens = context.model, context.setting, context.dtypes, context.tokens
    bandwidth = device.dram_bytes_per_s
    trained = not setting.uses_adapters
    traffic_scale = (dtypes.residual_bytes / 2 + dtypes.compute_bytes / 2) / 2 * compile_keep
    # fused kernels: the eager ops they replace leave (bf16 basis), their own traffic enters (own dtypes)
    eager = eager_replaced_traffic(model, context.fused, trained)
    fused = liger_layer_traffic(model, context.fused, dtypes, trained)
    fwd = (ops.forward_bytes_per_token - eager.forward_bytes_per_token) * tokens * traffic_scale / bandwidth
    bwd = (ops.backward_bytes_per_token - eager.backward_bytes_per_token) * tokens * traffic_scale / bandwidth
    fwd += fused.forward_bytes_per_token * tokens / bandwidth
    bwd += fused.backward_bytes_per_token * tokens / bandwidth
    fwd_kernels = (ops.forward_elementwise_kernels - eager.forward_kernels) * compile_keep
    bwd_kernels = (ops.backward_elementwise_kernels - eager.backward_kernels) * compile_keep
    fwd_kernels += fused.forward_kernels
    bwd_kernels += fused.backward_kernels
    if not context.flash_attention:  # the math path materializes n_q·s scores per token: mask, fp32 softmax, casts
        scores = tokens * model.num_attention_heads * context.seq_tokens * traffic_scale / bandwidth
        extras = [eager_attention()] + ([LEGACY_CLAMP] if setting.attention_impl == "eager-legacy" else [])
        for extra in extras:
            fwd += extra.forward_bytes_per_score * scores
            bwd += extra.backward_bytes_per_score * scores
            fwd_kernels += extra.forward_kernels * compile_keep
            bwd_kernels += extra.backward_kernels * compile_keep
    share = context.masked_attention_share
    if share > 0:  # the masked SDPA path: the mask's conversion and the k / v repeats, in that share of micro batches
        masked = masked_sdpa_extras(model, dtypes, context.seq_tokens)
        fwd += share * masked.forward_bytes_per_token * tokens * compile_keep / bandwidth
        bwd += share * masked.backward_bytes_per_token * tokens * compile_keep / bandwidth
        fwd_kernels += share * masked.forward_kernels * compile_keep
        bwd_kernels += share * masked.backward_kernels * compile_keep
    return PassWork(
        TermWork(fwd + fwd_kernels * GPU_KERNEL_MIN_S, fwd_kernels),
        TermWork(bwd + bwd_kernels * GPU_KERNEL_MIN_S, bwd_kernels),
    )


def lora_term(
    context: SettingContext, device: DeviceContext, coefficients: CostCoefficients, compile_keep: float
) -> PassWork:
    """The LoRA targets' skinny GEMMs and element-wise work, parameter adapters' merge GEMMs, peft's Python.

    fp32 adapters multiply on CUDA cores (peft casts x to fp32) unless autocast runs them in 16 bits. Without
    adapters: :data:`NO_PASS_WORK`.
    """
    model, setting, dtypes, tokens = context.model, context.setting, context.dtypes, context.tokens
    if not setting.uses_adapters:
        return NO_PASS_WORK
    lora = context.lora
    a, c = dtypes.adapter_bytes, dtypes.compute_bytes
    matmul = device.matmul[dtypes.compute_dtype]
    adapter_device = device.matmul[FP32_SIMT] if a == 4 and not dtypes.autocast else matmul
    gemm_bytes = a if not dtypes.autocast else c
    layers = context.layers
    fwd_gemm, bwd_gemm = lora_gemm_s(layers, lora, setting.lora_rank, tokens, gemm_bytes, adapter_device)
    fwd_ops, bwd_ops = lora_ops(a, c, context.lora_dropout > 0)
    fwd_bytes, fwd_kernels = lora_elementwise(layers, lora, fwd_ops, tokens)
    bwd_bytes, bwd_kernels = lora_elementwise(layers, lora, bwd_ops, tokens)
    # LoRA folded into an MoE's expert stacks (peft ParamWrapper): merge GEMMs and the experts' weight gradients
    wrapped_fwd, wrapped_bwd = wrapped_gemm_s(model, setting, tokens, c, matmul, lora=lora)
    bandwidth = device.dram_bytes_per_s
    fwd_lora_kernels = fwd_kernels * compile_keep
    bwd_lora_kernels = bwd_kernels * compile_keep
    fwd_s = fwd_gemm + wrapped_fwd + fwd_bytes * compile_keep / bandwidth + fwd_lora_kernels * GPU_KERNEL_MIN_S
    bwd_s = bwd_gemm + wrapped_bwd + bwd_bytes * compile_keep / bandwidth + bwd_lora_kernels * GPU_KERNEL_MIN_S
    # peft's Python per target and forward pass (its backward is autograd's C++ engine)
    python_s = targets_per_layer(layers, lora) * coefficients.lora_target_cpu_s
    return PassWork(TermWork(fwd_s, fwd_lora_kernels, python_s), TermWork(bwd_s, bwd_lora_kernels))


def dequant_term(context: SettingContext, device: DeviceContext, coefficients: CostCoefficients) -> PassWork:
    """QLoRA's NF4 dequantization of every decoder linear, in forward and again in backward (input gradient).

    Without QLoRA: :data:`NO_PASS_WORK`.
    """
    if context.setting.method != "qlora":
        return NO_PASS_WORK
    layers = context.layers
    linears = sum(m.count for m in context.linear_modules)
    moved, kernels = dequant_per_layer_pass(
        context.counts.decoder_linear_params,
        linears,
        layers,
        context.setting.qlora_double_quant,
        context.dtypes.compute_bytes,
    )
    one = TermWork(
        moved / device.dram_bytes_per_s + kernels * GPU_KERNEL_MIN_S,
        kernels,
        linears / layers * coefficients.qlora_linear_cpu_s,
    )
    return PassWork(one, one)


def layer_passes(
    context: SettingContext, device: DeviceContext, coefficients: CostCoefficients
) -> tuple[LayerPass, LayerPass]:
    """(forward, backward) of one decoder layer: GEMMs, attention, element-wise, adapters, dequantization."""
    setting = context.setting
    compile_keep = 1 - coefficients.compile_speedup if setting.compile else 1.0
    # GEMM and attention kernels are not fused by compile; the op counts' classes give how many
    ops = layer_ops(context.model, not setting.uses_adapters)
    gemm = gemm_term(context, device, ops)
    attention = attention_term(context, device, ops)
    elementwise = elementwise_term(context, device, ops, compile_keep)
    lora = lora_term(context, device, coefficients, compile_keep)
    dequant = dequant_term(context, device, coefficients)
    forward = LayerPass(gemm.forward, attention.forward, elementwise.forward, lora.forward, dequant.forward)
    backward = LayerPass(gemm.backward, attention.backward, elementwise.backward, lora.backward, dequant.backward)
    return forward, backward
