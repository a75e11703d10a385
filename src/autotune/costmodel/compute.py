"""Step time of one setting, term by term: GEMMs by shape, attention by kernel, element-wise traffic, exposed CPU
dispatch, LoRA adapters, QLoRA dequantization, collectives, offload, the optimizer step and fixed overheads.

Each term (docs/cost-model.md §5 has the formulas and sources):

* **GEMMs** — every ``nn.Linear`` of a decoder layer (``params.linear_modules``) as its forward, input-gradient
  and (when the weight trains) weight-gradient GEMM, timed by ``gemm.gemm_time_s`` from its shape (M = tokens per
  micro-step): tile and wave quantization over the GPU's SMs, K saturation, roofline; checkpointing adds one
  forward (Narayanan et al. 2021, eq. 3). lm_head is the (T × V × h) GEMM, in fp32 when the head is fp32.
* **attention** — ``gemm.attention_flops_forward`` (causal saving only for flash / memory-efficient kernels),
  backward 2.5× (flash) or 2× (math), at the attention efficiency of the GPU's architecture; the Triton flash
  kernel of the 2023 MPT measurements (``flash-triton``) takes ``gemm.TRITON_FLASH_ATTENTION_SLOWDOWN`` × as long.
* **element-wise** — the bytes the layer's non-GEMM kernels move, counted from the real module code
  (``dispatch.layer_ops``; bf16 basis, scaled by the residual dtype), at ``bandwidth × bandwidth_efficiency``;
  the logits/loss traffic (``activations.loss_bytes_per_logit``, forward and backward).
* **dispatch** — each kernel costs ``kernel_launch_s`` of CPU time (eager PyTorch); per decoder-layer pass the
  GPU hides it when its own work is longer, so a pass takes max(GPU time, CPU dispatch time). On the GPU each
  kernel adds ``optimizer_step.GPU_KERNEL_MIN_S`` (launch latency, ramp and tail) to its FLOPs / bytes time. Small micro
  batches (few tokens per kernel) become dispatch-bound; large ones hide it.
* **LoRA** — per target: two fp32 GEMMs forward (peft upcasts the adapters and casts the input), four backward,
  and the cast / dropout / scale / add traffic; **QLoRA** — per linear per pass: read the NF4 weight and write
  its bf16 copy (``units.nf4_bytes_per_param``), one dequantization kernel (bitsandbytes ``dequantize_4bit``).
* **communication** (``collectives``) — per layer, overlapped with that layer's compute only (FSDP / ZeRO-3
  prefetch one unit ahead); FSDP with ``grad_sync`` last-micro-step reduce-scatters in the last micro-step of a
  step only (``no_sync`` on the others; ``memory`` counts the unsharded gradients this keeps); DDP's all-reduce
  overlaps the last micro-step's backward, ZeRO-2's gather follows
  the step; ZeRO-3's per-submodule fetch / release hooks (``collectives.zero3_hooks_s``) per pass, exposed.
* **offload** and **optimizer step** (``optimizer_step``) — host-link traffic per micro-step hidden only behind
  compute that exists in that micro-step; GPU AdamW (bytes or launches, whichever is longer) or CPU Adam; plus
  ``step_overhead_s`` per step and ``micro_step_overhead_s`` per micro-step (trainer Python).
* **torch.compile** removes ``compile_speedup`` of the element-wise traffic and kernels (fusion).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from autotune.costmodel import activations as act
from autotune.costmodel.collectives import (
    DDP_BUCKET_BYTES,
    ZERO_BUCKET_ELEMENTS,
    bucketed_time_s,
    collective_time_s,
    zero3_hooks_s,
)
from autotune.costmodel.dispatch import LEGACY_CLAMP, eager_attention, layer_ops, lora_target_kernels
from autotune.costmodel.gemm import (
    DEFAULT_SM_COUNT,
    FLASH_BACKWARD_FACTOR,
    TRITON_FLASH_ATTENTION_SLOWDOWN,
    GemmDevice,
    attention_flops_forward,
    attention_time_s,
    linear_pass_time_s,
)
from autotune.costmodel.memory import base_weight_bytes
from autotune.costmodel.optimizer_step import GPU_KERNEL_MIN_S, offload_traffic_s, optimizer_step_s
from autotune.costmodel.param_adapters import wrapped_gemm_s
from autotune.costmodel.params import count_params, linear_modules, lora_module_targets, lora_params
from autotune.costmodel.precision import DtypeBytes, dtype_bytes
from autotune.schemas.calibration import CostCoefficients
from autotune.schemas.hardware import ClusterSpec, GpuSpec
from autotune.schemas.model import ModelSpec
from autotune.schemas.setting import SCORE_ATTENTION_IMPLS, TrainingSetting, Workload
from autotune.units import GB, TERA, nf4_bytes_per_param

HEAD_KERNELS = 40
"""Kernels outside the decoder layers per micro-step (embedding, final norm, lm_head, shift + cross-entropy
and its backward): a stated prior; the layer counts dominate (≥ 30 layers × 40+ kernels)."""

LORA_BYTES_PER_TOKEN_IN = 15.0
LORA_BYTES_PER_TOKEN_OUT = 14.0
"""Element-wise bytes per token per input / output feature of one peft LoRA target, forward (peft
``lora.Linear.forward``: bf16→fp32 cast of x (2 + 4), dropout (4 + 4 + 1 mask), then the fp32 result scaled and
added to the bf16 output (4 + 4 + 2 + 2 + 2)); the backward moves twice that."""

MATH_ATTENTION_BACKWARD_FACTOR = 2.0
"""Math (eager) attention backward: two GEMMs per forward GEMM (input gradients of QKᵀ and PV)."""


@dataclass(frozen=True)
class TimePrediction:
    """Predicted times in seconds for one GPU rank, with a breakdown.

    Attributes:
        micro_step_time_s: forward + backward of one micro batch, including exposed communication and offload.
        optimizer_time_s: optimizer step incl. CPU Adam, step overheads and exposed per-step communication.
        step_time_s: ``grad_accum × micro_step_time_s + optimizer_time_s``.
        model_flops_per_micro_step: PaLM-style model FLOPs (Chowdhery et al. 2022, appendix B) for MFU.
        breakdown_s: seconds per term of one optimizer step (they add up to ``step_time_s``).
    """

    micro_step_time_s: float
    optimizer_time_s: float
    step_time_s: float
    model_flops_per_micro_step: float
    breakdown_s: dict[str, float]


def architecture_generation(gpu: GpuSpec) -> str:
    """'ampere', 'hopper', 'ada', 'blackwell', 'volta', 'turing', 'cdna', 'rdna' from the profile's
    ``architecture`` text (its first word, lower case)."""
    return gpu.architecture.split()[0].strip(",").lower()


def efficiency(table: dict[str, float], gpu: GpuSpec) -> float:
    """A per-GPU coefficient: the GPU's own value, else its architecture generation's, else 'default'."""
    if gpu.key in table:
        return table[gpu.key]
    return table.get(architecture_generation(gpu), table["default"])


def _device(gpu: GpuSpec, dtype: str, coefficients: CostCoefficients, table: dict[str, float]) -> GemmDevice:
    peak = gpu.fp32_tflops if dtype == "fp32-simt" else gpu.matmul_tflops(dtype)
    bandwidth = gpu.memory_bandwidth_gb_per_s * GB * coefficients.bandwidth_efficiency
    return GemmDevice(peak * TERA * efficiency(table, gpu), gpu.sm_count or DEFAULT_SM_COUNT, bandwidth)


def _attention_dtype(dtypes: DtypeBytes) -> str:
    """fp32 attention when the residual stream is fp32 without autocast (QLoRA with fp32 unquantized parts,
    full fp32): SDPA then runs fp32 CUDA-core kernels (PyTorch leaves TF32 off for matmuls by default)."""
    return "fp32-simt" if dtypes.residual_bytes == 4 and not dtypes.autocast else dtypes.compute_dtype


@functools.lru_cache(maxsize=4096)
def layer_gemm_s(
    model: ModelSpec, tokens: float, element_bytes: float, device: GemmDevice, trainable: bool
) -> tuple[float, float]:
    """(forward, backward) seconds of one decoder layer's ``nn.Linear`` GEMMs by shape (module docstring); MoE
    experts see their share of the tokens. Cached: candidates repeat the same shapes."""
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


@functools.lru_cache(maxsize=4096)
def adapter_gemm_s(
    model: ModelSpec, targets: tuple[str, ...], rank: int, tokens: float, fp32_device: GemmDevice
) -> tuple[float, float]:
    """(forward, backward) seconds of one layer's LoRA GEMMs: per target x·Aᵀ (T × r × in) and ·Bᵀ (T × out × r)
    in fp32 forward; their input and weight gradients backward."""
    layers = model.num_hidden_layers
    forward = backward = 0.0
    for m in lora_module_targets(model, targets):
        per_layer = m.count // layers
        pairs = ((m.in_features, rank), (rank, m.out_features))
        forward += per_layer * sum(linear_pass_time_s(tokens, i, o, 4, fp32_device, "forward") for i, o in pairs)
        backward += per_layer * sum(
            linear_pass_time_s(tokens, i, o, 4, fp32_device, kind)
            for i, o in pairs
            for kind in ("input-grad", "weight-grad")
        )
    return forward, backward


def predict_time(
    model: ModelSpec,
    setting: TrainingSetting,
    cluster: ClusterSpec,
    workload: Workload,
    coefficients: CostCoefficients,
) -> TimePrediction:
    """Micro-step, optimizer-step and step times for one rank (terms in the module docstring)."""
    gpu = cluster.gpu
    dtypes = dtype_bytes(setting, gpu)
    counts = count_params(model)
    ranks = cluster.world_size
    layers = model.num_hidden_layers
    seq = workload.tokens_per_sequence
    tokens = setting.micro_batch_size * seq
    adapters = setting.uses_adapters
    trainable_base = not adapters
    flash = setting.attention_impl not in SCORE_ATTENTION_IMPLS and gpu.supports_flash_attention
    bandwidth = gpu.memory_bandwidth_gb_per_s * GB * coefficients.bandwidth_efficiency
    launch = coefficients.kernel_launch_s
    compile_keep = 1 - coefficients.compile_speedup if setting.compile else 1.0
    device = _device(gpu, dtypes.compute_dtype, coefficients, coefficients.matmul_efficiency)
    element = dtypes.compute_bytes
    forward_passes = 1 + int(setting.grad_ckpt)

    # --- GEMMs of one decoder layer, by shape ------------------------------------------------------------
    fwd_gemm, bwd_gemm = layer_gemm_s(model, tokens, element, device, trainable_base)

    # --- attention ------------------------------------------------------------------------------------------
    attention_device = _device(gpu, _attention_dtype(dtypes), coefficients, coefficients.attention_efficiency)
    attention_fwd_flops = attention_flops_forward(
        tokens, seq, model.num_attention_heads, model.head_dim, causal_skipped=flash
    )
    fwd_attention = attention_time_s(attention_fwd_flops, seq, attention_device)
    if setting.attention_impl == "flash-triton":  # same FLOPs and causal saving, a slower kernel (fwd + bwd)
        fwd_attention *= TRITON_FLASH_ATTENTION_SLOWDOWN
    bwd_attention = fwd_attention * (FLASH_BACKWARD_FACTOR if flash else MATH_ATTENTION_BACKWARD_FACTOR)

    # --- element-wise traffic and kernels, counted from the module code -------------------------------------
    ops = layer_ops(model, trainable_base)
    traffic_scale = (dtypes.residual_bytes / 2 + dtypes.compute_bytes / 2) / 2 * compile_keep
    fwd_elementwise = ops.forward_bytes_per_token * tokens * traffic_scale / bandwidth
    bwd_elementwise = ops.backward_bytes_per_token * tokens * traffic_scale / bandwidth
    fwd_kernels = ops.forward_kernels * compile_keep
    bwd_kernels = ops.backward_kernels * compile_keep
    if not flash:  # the math path materializes n_q·s scores per token: mask, fp32 softmax, casts
        scores = tokens * model.num_attention_heads * seq * traffic_scale / bandwidth
        extras = [eager_attention()] + ([LEGACY_CLAMP] if setting.attention_impl == "eager-legacy" else [])
        for extra in extras:
            fwd_elementwise += extra.forward_bytes_per_score * scores
            bwd_elementwise += extra.backward_bytes_per_score * scores
            fwd_kernels += extra.forward_kernels * compile_keep
            bwd_kernels += extra.backward_kernels * compile_keep

    # --- LoRA adapters and QLoRA dequantization, per layer --------------------------------------------------
    fwd_adapter = bwd_adapter = fwd_dequant = 0.0
    if adapters:
        fp32_device = _device(gpu, "fp32-simt", coefficients, coefficients.matmul_efficiency)
        lora_fwd_kernels, lora_bwd_kernels = lora_target_kernels()
        adapter_fwd_gemm, adapter_bwd_gemm = adapter_gemm_s(
            model, setting.lora_targets, setting.lora_rank, tokens, fp32_device
        )
        for m in lora_module_targets(model, setting.lora_targets):
            per_layer = m.count // layers
            traffic = (LORA_BYTES_PER_TOKEN_IN * m.in_features + LORA_BYTES_PER_TOKEN_OUT * m.out_features) * tokens
            fwd_adapter += per_layer * traffic * compile_keep / bandwidth
            bwd_adapter += per_layer * 2 * traffic * compile_keep / bandwidth
            fwd_kernels += per_layer * lora_fwd_kernels * compile_keep
            bwd_kernels += per_layer * lora_bwd_kernels * compile_keep
        fwd_adapter += adapter_fwd_gemm
        bwd_adapter += adapter_bwd_gemm
        # LoRA folded into an MoE's expert stacks (peft ParamWrapper): merge GEMMs and the experts' weight gradients
        wrapped_fwd, wrapped_bwd = wrapped_gemm_s(model, setting, tokens, element, device)
        fwd_adapter += wrapped_fwd
        bwd_adapter += wrapped_bwd
    if setting.method == "qlora":
        per_param = nf4_bytes_per_param(setting.qlora_double_quant) + dtypes.compute_bytes
        fwd_dequant = counts.decoder_linear_params / layers * per_param / bandwidth
        dequant_kernels = sum(m.count for m in linear_modules(model)) / layers
        fwd_kernels += dequant_kernels
        bwd_kernels += dequant_kernels

    # --- one layer's passes: GPU work vs CPU dispatch ---------------------------------------------------------
    # Every kernel also occupies the GPU for its launch latency and ramp / tail (``GPU_KERNEL_MIN_S``) beyond
    # its FLOPs and bytes: a cost per kernel, not per token, which larger micro batches share.
    fwd_tails = fwd_kernels * GPU_KERNEL_MIN_S
    bwd_tails = bwd_kernels * GPU_KERNEL_MIN_S
    gpu_fwd = fwd_gemm + fwd_attention + fwd_elementwise + fwd_adapter + fwd_dequant + fwd_tails
    gpu_bwd = bwd_gemm + bwd_attention + bwd_elementwise + bwd_adapter + fwd_dequant + bwd_tails
    layer_fwd = max(gpu_fwd, fwd_kernels * launch)
    layer_bwd = max(gpu_bwd, bwd_kernels * launch)
    layers_s = layers * (forward_passes * layer_fwd + layer_bwd)
    dispatch_exposed = layers * (
        forward_passes * max(0.0, fwd_kernels * launch - gpu_fwd) + max(0.0, bwd_kernels * launch - gpu_bwd)
    )

    # --- lm_head and loss -----------------------------------------------------------------------------------
    fp32_head = act.logits_dtype_bytes(setting, dtypes) == 4 and not dtypes.autocast
    head_device = _device(gpu, "fp32-simt", coefficients, coefficients.matmul_efficiency) if fp32_head else device
    head_element = 4 if fp32_head else element
    h, vocab = model.hidden_size, model.vocab_size
    head_s = linear_pass_time_s(tokens, h, vocab, head_element, head_device, "forward") * (
        1 + int(setting.loss_impl == "chunked")
    )
    head_s += linear_pass_time_s(tokens, h, vocab, head_element, head_device, "input-grad")
    if trainable_base:
        head_s += linear_pass_time_s(tokens, h, vocab, head_element, head_device, "weight-grad")
    logits_s = act.loss_bytes_per_logit(model, setting, dtypes) * tokens * vocab * 2 / bandwidth
    head_total = max(head_s + logits_s, HEAD_KERNELS * launch)
    compute_s = layers_s + head_total + coefficients.micro_step_overhead_s

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

    # --- offload: host-link traffic hidden only behind this micro-step's compute ----------------------------
    offload_exposed = 0.0
    if setting.offloads_to_cpu:
        traffic_s = offload_traffic_s(full_weight_bytes / ranks, grad_bytes / ranks, gpu, coefficients)
        offload_exposed = max(0.0, traffic_s - compute_s)
    hooks_s = 0.0
    if setting.uses_deepspeed and setting.shards_parameters:
        hooks_s = zero3_hooks_s(model, forward_passes + 1, coefficients)
    micro_step_s = compute_s + comm_exposed + offload_exposed + hooks_s
    if adapters:
        micro_step_s *= coefficients.adapter_time_factor
    if setting.method == "qlora":
        micro_step_s *= coefficients.qlora_time_factor

    # --- optimizer step --------------------------------------------------------------------------------------
    trainable_per_rank = trainable / ranks if setting.sharding not in ("none", "ddp") else trainable
    optimizer_s = optimizer_step_s(
        model, setting, gpu, dtypes, trainable_per_rank, coefficients, ranks_per_node=cluster.num_gpus_per_node
    )
    optimizer_total = optimizer_s + coefficients.step_overhead_s + step_comm_exposed
    step_s = setting.grad_accum * micro_step_s + optimizer_total

    model_flops = tokens * (
        6 * counts.matmul_params_per_token + 12 * layers * model.num_attention_heads * model.head_dim * seq
    )
    accum = setting.grad_accum
    layer_gpu = forward_passes * gpu_fwd + gpu_bwd
    share = layers_s - dispatch_exposed
    return TimePrediction(
        micro_step_time_s=micro_step_s,
        optimizer_time_s=optimizer_total,
        step_time_s=step_s,
        model_flops_per_micro_step=model_flops,
        breakdown_s={
            "gemm": accum * layers * (forward_passes * fwd_gemm + bwd_gemm) * share / max(layers * layer_gpu, 1e-30),
            "attention": accum
            * layers
            * (forward_passes * fwd_attention + bwd_attention)
            * share
            / max(layers * layer_gpu, 1e-30),
            "element-wise": accum
            * layers
            * (forward_passes * fwd_elementwise + bwd_elementwise)
            * share
            / max(layers * layer_gpu, 1e-30),
            "lora adapters + qlora dequant": accum
            * layers
            * (forward_passes * (fwd_adapter + fwd_dequant) + bwd_adapter + fwd_dequant)
            * share
            / max(layers * layer_gpu, 1e-30),
            "kernel launch tails": accum
            * layers
            * (forward_passes * fwd_tails + bwd_tails)
            * share
            / max(layers * layer_gpu, 1e-30),
            "exposed cpu dispatch": accum * dispatch_exposed,
            "lm_head + loss": accum * head_total,
            "micro-step overhead": accum * coefficients.micro_step_overhead_s,
            "exposed communication": accum * comm_exposed + step_comm_exposed,
            "exposed offload": accum * offload_exposed,
            "zero-3 module hooks": accum * hooks_s,
            "optimizer step": optimizer_s,
            "step overhead": coefficients.step_overhead_s,
            "user-recalibrated adapter/qlora factor": step_s
            - accum * (compute_s + comm_exposed + offload_exposed + hooks_s)
            - optimizer_total,
        },
    )
