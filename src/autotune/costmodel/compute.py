"""Step time of one setting as a sum of named terms (:class:`TimeTerms`).

The terms: GEMMs by shape, attention by kernel, element-wise traffic, LoRA adapters, QLoRA dequantization, lm_head +
loss, exposed CPU dispatch, exposed communication, ZeRO-3 hooks, exposed offload, the optimizer step and fixed
overheads. The setting's derived facts (dtypes, tokens, passes, the attention rule) come from
:class:`~autotune.costmodel.context.SettingContext`, the same object the memory model reads.

Each term (docs/cost-model.md §5 has the formulas, sources and measured error):

* **GEMMs** — every ``nn.Linear`` of a decoder layer (``params.linear_modules``) as its forward, input-gradient
  and (when the weight trains) weight-gradient GEMM, timed by ``gemm.gemm_time_s`` from its shape (M = tokens per
  micro-step): tile and wave quantization over the GPU's SMs, K saturation, roofline; checkpointing adds one
  forward (Narayanan et al. 2021, eq. 3). lm_head is the (T × V × h) GEMM, in fp32 when the head is fp32.
* **attention** — ``gemm.attention_flops_forward`` (causal saving only for flash / memory-efficient kernels),
  backward 2.5× (flash) or 2× (math), at the attention efficiency of the GPU's architecture; the Triton flash
  kernel of the 2023 MPT measurements (``flash-triton``) takes ``priors.TRITON_FLASH_ATTENTION_TIME_RATIO`` × as long.
* **element-wise** — the bytes the layer's non-GEMM kernels move, counted from the real module code
  (``dispatch.layer_ops``; bf16 basis, scaled by the residual dtype), at ``bandwidth × bandwidth_efficiency``;
  the logits/loss traffic (``activations.loss_bytes_per_logit``, forward and backward).
* **dispatch** — each kernel costs ``kernel_launch_s`` of CPU time (eager PyTorch), each peft LoRA target
  ``lora_target_cpu_s`` per forward pass and each bitsandbytes Linear4bit ``qlora_linear_cpu_s`` per pass; per
  decoder-layer pass the GPU hides it when its own work is longer, so a pass takes max(GPU time, CPU time) and the
  excess is the ``exposed cpu dispatch`` term. On the GPU each kernel adds ``priors.GPU_KERNEL_MIN_S``
  (launch latency, ramp and tail) to its term. Small micro batches become dispatch-bound; large ones hide it.
* **LoRA** and **QLoRA** — counted from what peft and bitsandbytes run (``adapter_time``): casts only when the
  adapters' dtype differs from the input's, dropout only when p > 0, two skinny GEMMs at their own shape, scale
  and add; the NF4 dequantization of every linear in every pass.
* **communication** (``collectives``) — per layer, overlapped with that layer's compute only (FSDP / ZeRO-3
  prefetch one unit ahead); FSDP with ``grad_sync`` last-micro-step reduce-scatters in the last micro-step of a
  step only (``no_sync`` on the others; ``memory`` counts the unsharded gradients this keeps); DDP's all-reduce
  overlaps the last micro-step's backward, ZeRO-2's gather follows
  the step; ZeRO-3's per-submodule fetch / release hooks (``collectives.zero3_hooks_s``) per pass, exposed.
* **offload** and **optimizer step** (``optimizer_step``) — host-link traffic per micro-step hidden only behind
  compute that exists in that micro-step; GPU AdamW (bytes or launches, whichever is longer) or CPU Adam; plus
  ``step_overhead_s`` per step and ``micro_step_overhead_s`` per micro-step (trainer Python).
* **torch.compile** removes ``compile_speedup`` of the element-wise traffic and kernels (fusion).
* **fused kernels** (``kernels: liger``, ``SettingContext.fused``): the eager ops Liger replaces leave the
  element-wise term and the fused kernels' own traffic (in their tensors' dtypes, not reduced by compile) enters it;
  lm_head + loss becomes the fused linear cross-entropy's chunked GEMMs and traffic (``fused_kernels``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from autotune.costmodel import activations as act
from autotune.costmodel.adapter_time import (
    dequant_per_layer_pass,
    lora_elementwise,
    lora_gemm_s,
    lora_ops,
    targets_per_layer,
)
from autotune.costmodel.collectives import (
    DDP_BUCKET_BYTES,
    ZERO_BUCKET_ELEMENTS,
    bucketed_time_s,
    collective_time_s,
    zero3_hooks_s,
)
from autotune.costmodel.context import SettingContext, setting_context
from autotune.costmodel.dispatch import LEGACY_CLAMP, eager_attention, layer_ops
from autotune.costmodel.fused_kernels import eager_replaced_traffic, liger_head_work, liger_layer_traffic
from autotune.costmodel.gemm import (
    GemmDevice,
    attention_flops_forward,
    attention_time_s,
    linear_pass_time_s,
)
from autotune.costmodel.memory import base_weight_bytes
from autotune.costmodel.optimizer_step import dram_bytes_per_s, offload_traffic_s, optimizer_step_s
from autotune.costmodel.param_adapters import wrapped_gemm_s
from autotune.costmodel.params import linear_modules, lora_params
from autotune.costmodel.precision import DtypeBytes
from autotune.costmodel.priors import (
    DEFAULT_SM_COUNT,
    FLASH_BACKWARD_FLOPS_RATIO,
    GPU_KERNEL_MIN_S,
    HEAD_KERNELS_PER_MICRO_STEP,
    TRITON_FLASH_ATTENTION_TIME_RATIO,
)
from autotune.schemas.calibration import CostCoefficients
from autotune.schemas.hardware import ClusterSpec, GpuSpec
from autotune.schemas.model import ModelSpec
from autotune.schemas.setting import TrainingSetting, Workload
from autotune.units import TERA

MATH_ATTENTION_BACKWARD_FACTOR = 2.0
"""Math (eager) attention backward: two GEMMs per forward GEMM (input gradients of QKᵀ and PV)."""

TERM_LABELS: dict[str, str] = {
    "gemm_s": "gemm",
    "attention_s": "attention",
    "elementwise_s": "element-wise",
    "lora_adapters_s": "lora adapters",
    "qlora_dequant_s": "qlora dequant",
    "lm_head_loss_s": "lm_head + loss",
    "exposed_dispatch_s": "exposed cpu dispatch",
    "exposed_communication_s": "exposed communication",
    "zero3_hooks_s": "zero-3 module hooks",
    "offload_s": "exposed offload",
    "optimizer_step_s": "optimizer step",
    "fixed_overheads_s": "fixed overheads",
}
"""Each :class:`TimeTerms` field and its name in ``Estimate.time_breakdown_s``, the table and docs/cost-model.md §5."""


@dataclass(frozen=True)
class TimeTerms:
    """Seconds of one optimizer step on one rank, term by term; :meth:`total_s` is the step time.

    Every GPU term includes its kernels' per-kernel GPU cost (``GPU_KERNEL_MIN_S`` each). Terms (docs §5):
        gemm_s: the decoder layers' ``nn.Linear`` GEMMs by shape (forward, recompute, backward).
        attention_s: the attention kernel (flash or math, ``context.uses_flash_attention``).
        elementwise_s: the layers' non-GEMM kernels (norms, rotary, activation, residual adds, casts, math
            attention's softmax), counted from the module code.
        lora_adapters_s: the LoRA targets' skinny GEMMs and element-wise work (``adapter_time``); parameter
            adapters' merge GEMMs (``param_adapters``).
        qlora_dequant_s: bitsandbytes' dequantization of every NF4 linear per pass (``adapter_time``).
        lm_head_loss_s: the output projection and the logits / cross-entropy traffic.
        exposed_dispatch_s: CPU dispatch time the GPU cannot hide (a pass whose kernels take longer to launch
            than to run waits for the CPU).
        exposed_communication_s: collectives not hidden behind compute (per micro-step and per step).
        zero3_hooks_s: DeepSpeed ZeRO-3's per-module fetch / release hooks.
        offload_s: host-link traffic not hidden behind the micro-step's compute.
        optimizer_step_s: the optimizer (GPU AdamW or CPU Adam).
        fixed_overheads_s: the trainer's per-micro-step and per-step Python overheads.
    """

    gemm_s: float = 0.0
    attention_s: float = 0.0
    elementwise_s: float = 0.0
    lora_adapters_s: float = 0.0
    qlora_dequant_s: float = 0.0
    lm_head_loss_s: float = 0.0
    exposed_dispatch_s: float = 0.0
    exposed_communication_s: float = 0.0
    zero3_hooks_s: float = 0.0
    offload_s: float = 0.0
    optimizer_step_s: float = 0.0
    fixed_overheads_s: float = 0.0

    def total_s(self) -> float:
        """The sum of the terms."""
        return sum(getattr(self, name) for name in TERM_LABELS)

    def labelled(self) -> dict[str, float]:
        """{label: seconds} in ``TERM_LABELS`` order."""
        return {label: getattr(self, name) for name, label in TERM_LABELS.items()}


@dataclass(frozen=True)
class TimePrediction:
    """Predicted times in seconds for one GPU rank, with its terms.

    Attributes:
        micro_step_time_s: forward + backward of one micro batch, including exposed communication and offload.
        optimizer_time_s: optimizer step incl. CPU Adam, the step overhead and exposed per-step communication.
        step_time_s: ``grad_accum × micro_step_time_s + optimizer_time_s`` (= ``terms.total_s()``).
        model_flops_per_micro_step: PaLM-style model FLOPs (Chowdhery et al. 2022, appendix B) for MFU.
        terms: the seconds of one optimizer step, term by term (:class:`TimeTerms`).
    """

    micro_step_time_s: float
    optimizer_time_s: float
    step_time_s: float
    model_flops_per_micro_step: float
    terms: TimeTerms

    @property
    def breakdown_s(self) -> dict[str, float]:
        """The terms by label (``TERM_LABELS``); they add up to ``step_time_s``."""
        return self.terms.labelled()


def architecture_generation(gpu: GpuSpec) -> str:
    """The GPU's architecture generation from the profile's ``architecture`` text (its first word, lower case).

    One of 'ampere', 'hopper', 'ada', 'blackwell', 'volta', 'turing', 'cdna', 'rdna'.
    """
    return _generation(gpu.architecture)


@functools.lru_cache(maxsize=64)
def _generation(architecture: str) -> str:
    return architecture.split()[0].strip(",").lower()


def efficiency(table: dict[str, float], gpu: GpuSpec) -> float:
    """A per-GPU coefficient: the GPU's own value, else its architecture generation's, else 'default'."""
    if gpu.key in table:
        return table[gpu.key]
    return table.get(architecture_generation(gpu), table["default"])


def _device(gpu: GpuSpec, dtype: str, coefficients: CostCoefficients, table: dict[str, float]) -> GemmDevice:
    peak = gpu.fp32_tflops if dtype == "fp32-simt" else gpu.matmul_tflops(dtype)
    bandwidth = dram_bytes_per_s(gpu, coefficients)
    return GemmDevice(peak * TERA * efficiency(table, gpu), gpu.sm_count or DEFAULT_SM_COUNT, bandwidth)


def _attention_dtype(dtypes: DtypeBytes) -> str:
    """The attention dtype: fp32 when the residual stream is fp32 without autocast, else the compute dtype's.

    fp32 happens with QLoRA with fp32 unquantized parts and with full fp32: SDPA then runs fp32 CUDA-core kernels
    (PyTorch leaves TF32 off for matmuls by default).
    """
    return "fp32-simt" if dtypes.residual_bytes == 4 and not dtypes.autocast else dtypes.compute_dtype


@functools.lru_cache(maxsize=4096)
def layer_gemm_s(
    model: ModelSpec, tokens: float, element_bytes: float, device: GemmDevice, trainable: bool
) -> tuple[float, float]:
    """(forward, backward) seconds of one decoder layer's ``nn.Linear`` GEMMs by shape (module docstring).

    MoE experts see their share of the tokens. Cached: candidates repeat the same shapes.
    """
    layers = model.num_hidden_layers
    forward = backward = 0.0
    experts_share = model.num_experts_per_token / model.num_experts
    for m in linear_modules(model):
        per_layer = m.count // layers
        expert = m.group == "mlp" and m.name != "router" and model.num_experts > 1
        m_tokens = tokens * (experts_share if expert else 1)
        shape = (m_tokens, m.in_features, m.out_features, element_bytes, device)
        forward += per_layer * linear_pass_time_s(*shape, "forward")
        backward += per_layer * linear_pass_time_s(*shape, "input-grad")
        if trainable:
            backward += per_layer * linear_pass_time_s(*shape, "weight-grad")
    return forward, backward


def predict_time(
    model: ModelSpec,
    setting: TrainingSetting,
    cluster: ClusterSpec,
    workload: Workload,
    coefficients: CostCoefficients,
) -> TimePrediction:
    """Micro-step, optimizer-step and step times for one rank: :func:`predict_time_in` of its context."""
    return predict_time_in(setting_context(model, setting, cluster, workload), coefficients)


@dataclass
class _Pass:
    """One decoder layer's pass (forward or backward): GPU seconds per term, kernels, CPU seconds beyond kernels.

    The CPU seconds are those of Python calls beyond their kernels (peft's LoRA targets, bitsandbytes' Linear4bit).
    """

    gpu_s: dict[str, float]
    kernels: float
    python_cpu_s: float = 0.0

    def gpu_total_s(self) -> float:
        return sum(self.gpu_s.values())


def _layer_passes(context: SettingContext, coefficients: CostCoefficients) -> tuple[_Pass, _Pass]:
    """(forward, backward) of one decoder layer: GEMMs, attention, element-wise, adapters, dequantization.

    Each term's GPU seconds include its kernels' ``GPU_KERNEL_MIN_S``.
    """
    model, setting, gpu, dtypes = context.model, context.setting, context.gpu, context.dtypes
    tokens, seq = context.tokens, context.seq_tokens
    adapters = setting.uses_adapters
    flash = context.flash_attention
    bandwidth = dram_bytes_per_s(gpu, coefficients)
    compile_keep = 1 - coefficients.compile_speedup if setting.compile else 1.0
    device = _device(gpu, dtypes.compute_dtype, coefficients, coefficients.matmul_efficiency)
    tail = GPU_KERNEL_MIN_S
    layers = model.num_hidden_layers

    fwd_gemm, bwd_gemm = layer_gemm_s(model, tokens, dtypes.compute_bytes, device, not adapters)
    # GEMM and attention kernels are not fused by compile; the op counts' classes give how many
    ops = layer_ops(model, not adapters)
    fwd_gemm_kernels, bwd_gemm_kernels = ops.forward_gemm_kernels, ops.backward_gemm_kernels
    fwd_attention_kernels, bwd_attention_kernels = ops.forward_attention_kernels, ops.backward_attention_kernels

    attention_device = _device(gpu, _attention_dtype(dtypes), coefficients, coefficients.attention_efficiency)
    attention_fwd_flops = attention_flops_forward(
        tokens, seq, model.num_attention_heads, model.head_dim, causal_skipped=flash
    )
    fwd_attention = attention_time_s(attention_fwd_flops, seq, attention_device)
    if setting.attention_impl == "flash-triton":  # same FLOPs and causal saving, a slower kernel (fwd + bwd)
        fwd_attention *= TRITON_FLASH_ATTENTION_TIME_RATIO
    bwd_attention = fwd_attention * (FLASH_BACKWARD_FLOPS_RATIO if flash else MATH_ATTENTION_BACKWARD_FACTOR)

    traffic_scale = (dtypes.residual_bytes / 2 + dtypes.compute_bytes / 2) / 2 * compile_keep
    # fused kernels: the eager ops they replace leave (bf16 basis), their own traffic enters (own dtypes)
    eager = eager_replaced_traffic(model, context.fused, not adapters)
    fused = liger_layer_traffic(model, context.fused, dtypes, not adapters)
    fwd_elementwise = (ops.forward_bytes_per_token - eager.forward_bytes_per_token) * tokens * traffic_scale / bandwidth
    bwd_elementwise = (
        (ops.backward_bytes_per_token - eager.backward_bytes_per_token) * tokens * traffic_scale / bandwidth
    )
    fwd_elementwise += fused.forward_bytes_per_token * tokens / bandwidth
    bwd_elementwise += fused.backward_bytes_per_token * tokens / bandwidth
    fwd_elementwise_kernels = (ops.forward_elementwise_kernels - eager.forward_kernels) * compile_keep
    bwd_elementwise_kernels = (ops.backward_elementwise_kernels - eager.backward_kernels) * compile_keep
    fwd_elementwise_kernels += fused.forward_kernels
    bwd_elementwise_kernels += fused.backward_kernels
    if not flash:  # the math path materializes n_q·s scores per token: mask, fp32 softmax, casts
        scores = tokens * model.num_attention_heads * seq * traffic_scale / bandwidth
        extras = [eager_attention()] + ([LEGACY_CLAMP] if setting.attention_impl == "eager-legacy" else [])
        for extra in extras:
            fwd_elementwise += extra.forward_bytes_per_score * scores
            bwd_elementwise += extra.backward_bytes_per_score * scores
            fwd_elementwise_kernels += extra.forward_kernels * compile_keep
            bwd_elementwise_kernels += extra.backward_kernels * compile_keep

    forward = _Pass(
        gpu_s={
            "gemm_s": fwd_gemm + fwd_gemm_kernels * tail,
            "attention_s": fwd_attention + fwd_attention_kernels * tail,
            "elementwise_s": fwd_elementwise + fwd_elementwise_kernels * tail,
        },
        kernels=fwd_gemm_kernels + fwd_attention_kernels + fwd_elementwise_kernels,
    )
    backward = _Pass(
        gpu_s={
            "gemm_s": bwd_gemm + bwd_gemm_kernels * tail,
            "attention_s": bwd_attention + bwd_attention_kernels * tail,
            "elementwise_s": bwd_elementwise + bwd_elementwise_kernels * tail,
        },
        kernels=bwd_gemm_kernels + bwd_attention_kernels + bwd_elementwise_kernels,
    )

    if adapters:
        targets = setting.lora_targets
        a, c = dtypes.adapter_bytes, dtypes.compute_bytes
        # fp32 adapters multiply on CUDA cores (peft casts x to fp32) unless autocast runs them in 16 bits
        adapter_device = (
            _device(gpu, "fp32-simt", coefficients, coefficients.matmul_efficiency)
            if a == 4 and not dtypes.autocast
            else device
        )
        gemm_bytes = a if not dtypes.autocast else c
        lora_fwd_gemm, lora_bwd_gemm = lora_gemm_s(
            model, targets, setting.lora_rank, tokens, gemm_bytes, adapter_device
        )
        fwd_ops, bwd_ops = lora_ops(a, c, context.lora_dropout > 0)
        fwd_bytes, fwd_kernels = lora_elementwise(model, targets, fwd_ops, tokens)
        bwd_bytes, bwd_kernels = lora_elementwise(model, targets, bwd_ops, tokens)
        # LoRA folded into an MoE's expert stacks (peft ParamWrapper): merge GEMMs and the experts' weight gradients
        wrapped_fwd, wrapped_bwd = wrapped_gemm_s(model, setting, tokens, dtypes.compute_bytes, device)
        fwd_lora_kernels = fwd_kernels * compile_keep
        bwd_lora_kernels = bwd_kernels * compile_keep
        forward.gpu_s["lora_adapters_s"] = (
            lora_fwd_gemm + wrapped_fwd + fwd_bytes * compile_keep / bandwidth + fwd_lora_kernels * tail
        )
        backward.gpu_s["lora_adapters_s"] = (
            lora_bwd_gemm + wrapped_bwd + bwd_bytes * compile_keep / bandwidth + bwd_lora_kernels * tail
        )
        forward.kernels += fwd_lora_kernels
        backward.kernels += bwd_lora_kernels
        # peft's Python per target and forward pass (its backward is autograd's C++ engine)
        forward.python_cpu_s += targets_per_layer(model, targets) * coefficients.lora_target_cpu_s
    if setting.method == "qlora":
        linears = sum(m.count for m in linear_modules(model))
        moved, kernels = dequant_per_layer_pass(
            context.counts.decoder_linear_params, linears, layers, setting.qlora_double_quant, dtypes.compute_bytes
        )
        for one in (forward, backward):  # the backward's input gradient dequantizes again
            one.gpu_s["qlora_dequant_s"] = moved / bandwidth + kernels * tail
            one.kernels += kernels
            one.python_cpu_s += linears / layers * coefficients.qlora_linear_cpu_s
    return forward, backward


@functools.lru_cache(maxsize=1024)
def _head_gemm_s(
    tokens: float, h: int, vocab: int, element: float, device: GemmDevice, chunked: bool, trained: bool
) -> float:
    """lm_head's GEMMs per micro-step. Cached per shape.

    Forward (twice for the chunked loss), input gradient, and the weight gradient when the head trains.
    """
    seconds = linear_pass_time_s(tokens, h, vocab, element, device, "forward") * (1 + int(chunked))
    seconds += linear_pass_time_s(tokens, h, vocab, element, device, "input-grad")
    if trained:
        seconds += linear_pass_time_s(tokens, h, vocab, element, device, "weight-grad")
    return seconds


def _head_s(context: SettingContext, coefficients: CostCoefficients) -> tuple[float, float]:
    """(GPU seconds, kernels) of lm_head and the logits / loss element-wise traffic, per micro-step.

    lm_head counts forward and backward (a chunked loss recomputes the forward); Liger's fused linear cross-entropy when
    the context fuses it.
    """
    model, setting, gpu, dtypes = context.model, context.setting, context.gpu, context.dtypes
    tokens = context.tokens
    bandwidth = dram_bytes_per_s(gpu, coefficients)
    fp32_head = act.logits_dtype_bytes(setting, dtypes) == 4 and not dtypes.autocast
    head_device = _device(
        gpu, "fp32-simt" if fp32_head else dtypes.compute_dtype, coefficients, coefficients.matmul_efficiency
    )
    head_element = 4 if fp32_head else dtypes.compute_bytes
    if context.fused.linear_cross_entropy:
        logit_bytes = act.logits_dtype_bytes(setting, dtypes)
        work = liger_head_work(model, setting, dtypes, tokens, logit_bytes, head_device)
        kernels = HEAD_KERNELS_PER_MICRO_STEP + work.kernels
        return work.gemm_s + work.elementwise_bytes / bandwidth + kernels * GPU_KERNEL_MIN_S, kernels
    head_s = _head_gemm_s(
        tokens, model.hidden_size, model.vocab_size, head_element, head_device,
        setting.loss_impl == "chunked", not setting.uses_adapters,
    )  # fmt: skip
    vocab = model.vocab_size
    logits_s = act.loss_bytes_per_logit(model, setting, dtypes) * tokens * vocab * 2 / bandwidth
    return head_s + logits_s + HEAD_KERNELS_PER_MICRO_STEP * GPU_KERNEL_MIN_S, HEAD_KERNELS_PER_MICRO_STEP


def predict_time_in(context: SettingContext, coefficients: CostCoefficients) -> TimePrediction:
    """Micro-step, optimizer-step and step times for one rank, as :class:`TimeTerms` (module docstring).

    A layer's pass takes its GPU work or its CPU dispatch (kernels × ``kernel_launch_s``), whichever is longer: the
    GPU terms plus ``exposed_dispatch_s`` = max(0, CPU − GPU). Collectives overlap the layer compute they can hide
    behind; what is left is ``exposed_communication_s``.
    """
    model, setting, cluster, dtypes = context.model, context.setting, context.cluster, context.dtypes
    gpu, counts = cluster.gpu, context.counts
    ranks = cluster.world_size
    layers = model.num_hidden_layers
    seq = context.seq_tokens
    tokens = context.tokens
    adapters = setting.uses_adapters
    forward_passes = context.forward_passes
    launch = coefficients.kernel_launch_s

    # --- the decoder layers: GPU work per term, CPU dispatch exposed where it is longer -----------------------
    forward, backward = _layer_passes(context, coefficients)
    layer_fwd_gpu, layer_bwd_gpu = forward.gpu_total_s(), backward.gpu_total_s()
    fwd_exposed = max(0.0, forward.kernels * launch + forward.python_cpu_s - layer_fwd_gpu)
    bwd_exposed = max(0.0, backward.kernels * launch + backward.python_cpu_s - layer_bwd_gpu)
    layer_fwd = layer_fwd_gpu + fwd_exposed
    layer_bwd = layer_bwd_gpu + bwd_exposed
    micro: dict[str, float] = {}
    for one, passes in ((forward, forward_passes), (backward, 1)):
        for name, seconds in one.gpu_s.items():
            micro[name] = micro.get(name, 0.0) + layers * passes * seconds
    head_gpu, head_kernels = _head_s(context, coefficients)
    head_exposed = max(0.0, head_kernels * launch - head_gpu)
    micro["lm_head_loss_s"] = head_gpu
    micro["exposed_dispatch_s"] = layers * (forward_passes * fwd_exposed + bwd_exposed) + head_exposed
    micro["fixed_overheads_s"] = coefficients.micro_step_overhead_s
    compute_s = sum(micro.values())

    # --- communication, overlapped layer by layer -----------------------------------------------------------
    full_weight_bytes = base_weight_bytes(model, counts, setting, dtypes)
    gathered_bytes = full_weight_bytes if not dtypes.autocast else counts.total_params * dtypes.compute_bytes
    trainable = lora_params(model, setting.lora_rank, setting.lora_targets) if adapters else counts.total_params
    grad_bytes = trainable * dtypes.grad_bytes
    comm_exposed = step_comm_exposed = 0.0
    layer_share = (counts.attention_params_per_layer + counts.mlp_params_per_layer) / max(1, counts.total_params)
    root_share = max(0.0, 1 - layers * layer_share)
    if ranks > 1 and setting.shards_parameters:
        gather = collective_time_s("all-gather", gathered_bytes * layer_share, cluster, coefficients)
        scatter = collective_time_s("reduce-scatter", grad_bytes * layer_share, cluster, coefficients)
        root = collective_time_s("all-gather", gathered_bytes * root_share, cluster, coefficients)
        backward_compute = layer_bwd + (forward_passes - 1) * layer_fwd
        # grad_sync last-micro-step (FSDP under no_sync): only the last micro-step of a step reduce-scatters.
        synced = 1.0 / setting.grad_accum if setting.uses_fsdp and setting.grad_sync == "last-micro-step" else 1.0
        comm_exposed = (
            2 * root
            + gather
            + layers * max(0.0, gather - layer_fwd)
            + layers * synced * max(0.0, gather + scatter - backward_compute)
            + layers * (1 - synced) * max(0.0, gather - backward_compute)
        )
    elif ranks > 1 and setting.sharding == "zero2":
        scatter_s = bucketed_time_s(
            "reduce-scatter", grad_bytes, ZERO_BUCKET_ELEMENTS * dtypes.grad_bytes, cluster, coefficients
        )
        comm_exposed = max(0.0, scatter_s - layers * layer_bwd)
        step_comm_exposed = bucketed_time_s(
            "all-gather", gathered_bytes, ZERO_BUCKET_ELEMENTS * dtypes.weight_bytes, cluster, coefficients
        )
    elif ranks > 1 and setting.sharding == "ddp":
        reduce_s = bucketed_time_s("all-reduce", grad_bytes, DDP_BUCKET_BYTES, cluster, coefficients)
        last_bucket = collective_time_s("all-reduce", min(grad_bytes, DDP_BUCKET_BYTES), cluster, coefficients)
        step_comm_exposed = max(last_bucket, reduce_s - layers * layer_bwd)
    micro["exposed_communication_s"] = comm_exposed

    # --- offload: host-link traffic hidden only behind this micro-step's compute ----------------------------
    if setting.offloads_to_cpu:
        traffic_s = offload_traffic_s(full_weight_bytes / ranks, grad_bytes / ranks, gpu, coefficients)
        micro["offload_s"] = max(0.0, traffic_s - compute_s)
    if setting.uses_deepspeed and setting.shards_parameters:
        micro["zero3_hooks_s"] = zero3_hooks_s(model, forward_passes + 1, coefficients)
    micro_step_s = sum(micro.values())

    # --- optimizer step --------------------------------------------------------------------------------------
    trainable_per_rank = trainable / ranks if setting.sharding not in ("none", "ddp") else trainable
    optimizer_s = optimizer_step_s(
        model, setting, gpu, dtypes, trainable_per_rank, coefficients, ranks_per_node=cluster.num_gpus_per_node
    )
    per_step = {
        "optimizer_step_s": optimizer_s,
        "exposed_communication_s": step_comm_exposed,
        "fixed_overheads_s": coefficients.step_overhead_s,
    }
    optimizer_total = sum(per_step.values())
    accum = setting.grad_accum
    # one optimizer step: every micro-step term × the accumulation steps, plus the per-step terms
    terms = TimeTerms(**{name: accum * micro.get(name, 0.0) + per_step.get(name, 0.0) for name in TERM_LABELS})

    model_flops = tokens * (
        6 * counts.matmul_params_per_token + 12 * layers * model.num_attention_heads * model.head_dim * seq
    )
    return TimePrediction(
        micro_step_time_s=micro_step_s,
        optimizer_time_s=optimizer_total,
        step_time_s=accum * micro_step_s + optimizer_total,
        model_flops_per_micro_step=model_flops,
        terms=terms,
    )
