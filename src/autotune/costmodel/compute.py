"""Step time: FLOPs, memory traffic, kernel dispatch, communication, offload and the optimizer step.

FLOPs per token follow Kaplan et al. 2020 (eq. 2.2, forward ≈ 2·N per token) and Narayanan et al. 2021
("Efficient Large-Scale Language Model Training on GPU Clusters", eq. 3: backward = 2× forward, one extra
forward when activations are recomputed). Frozen weights (LoRA / QLoRA) skip the weight-gradient GEMM,
so their backward is 1× forward (Hu et al. 2021, LoRA, section 4.2). Attention score FLOPs are
4·n_q·d·s per token per layer forward (QKᵀ and PV), halved by causal flash attention (Dao et al. 2022)
which skips masked tiles; flash backward costs 2.5× its forward (5 matmuls instead of 2).

Each pass over the weights runs at the roofline of the GPU (Williams et al. 2009): the slower of its
FLOPs at ``peak × matmul_efficiency`` and its weight bytes at ``bandwidth × bandwidth_efficiency``, so
small micro-batches and short sequences become bandwidth-bound. Element-wise kernels (norms, RoPE,
activations, LoRA casts/dropout, the loss) are bandwidth-bound: each saved activation is written in
forward and read in backward with its gradient (3 transfers). Eager PyTorch dispatches each op from the
CPU; when the GPU work per op is short the step is dispatch-bound, so the micro-step takes the slower of
GPU time and dispatch time. Communication (NCCL ring: 2(N−1)/N of the bytes for all-reduce, (N−1)/N for
all-gather / reduce-scatter; Patarasuk & Yuan 2009) and host-link offload traffic overlap with compute up
to ``COMM_OVERLAP`` of the compute time.
"""

from __future__ import annotations

from dataclasses import dataclass

from autotune.costmodel import activations as act
from autotune.costmodel.memory import base_weight_bytes
from autotune.costmodel.params import count_params, lora_params, lora_target_modules
from autotune.costmodel.precision import DtypeBytes, dtype_bytes
from autotune.schemas.calibration import CostCoefficients
from autotune.schemas.hardware import ClusterSpec
from autotune.schemas.model import ModelSpec
from autotune.schemas.setting import TrainingSetting, Workload
from autotune.units import GB, TERA, nf4_bytes_per_param

FLASH_BACKWARD_FACTOR = 2.5
"""Flash-attention backward FLOPs over its forward (Dao et al. 2022, section 3.1 / appendix B.4)."""

ELEMENTWISE_TRANSFERS = 3.0
"""Times each saved activation crosses DRAM: written in forward, read in backward, gradient written."""

COMM_OVERLAP = 0.8
"""Fraction of the compute time that can hide communication / offload traffic (prefetch, bucketing)."""

OPS_PER_LAYER_FORWARD = 50
"""Eager ops one Llama decoder layer dispatches in forward (norms 2×8, 7 matmuls, RoPE ~12, SDPA,
activation, mul, residual adds, views); counted from transformers' modeling_llama.py."""

OPS_PER_ADAPTER_FORWARD = 7
"""Eager ops one peft LoRA target adds in forward (cast, dropout, lora_A, lora_B, scale, add, cast)."""

BACKWARD_OPS_FACTOR = 1.5
"""Backward dispatches ~1.5× the forward's ops (autograd nodes plus gradient accumulation)."""


@dataclass(frozen=True)
class TimePrediction:
    """Predicted times in seconds for one GPU rank, with a breakdown of one micro-step.

    Attributes:
        micro_step_time_s: forward + backward of one micro batch, including exposed communication.
        optimizer_time_s: optimizer step incl. offload CPU-Adam and exposed DDP / ZeRO-2 communication.
        step_time_s: ``grad_accum × micro_step_time_s + optimizer_time_s``.
        model_flops_per_micro_step: PaLM-style model FLOPs (Chowdhery et al. 2022, appendix B) for MFU.
        breakdown_s: named parts of the micro-step (they need not add up: overlapped parts take a max).
    """

    micro_step_time_s: float
    optimizer_time_s: float
    step_time_s: float
    model_flops_per_micro_step: float
    breakdown_s: dict[str, float]


def _link_bytes_per_s(cluster: ClusterSpec) -> float:
    """Per-GPU collective bandwidth: NVLink/xGMI or PCIe inside a node, the network across nodes."""
    gpu = cluster.gpu
    intra = (gpu.gpu_link_gb_per_s or gpu.host_link_gb_per_s) * GB
    if cluster.num_nodes > 1:
        return min(intra, cluster.inter_node_gb_per_s * GB)
    return intra


def matmul_efficiency(gpu_key: str, coefficients: CostCoefficients) -> float:
    """Fitted fraction of the dense peak that large training GEMMs reach on a GPU ('default' if unfitted)."""
    return coefficients.matmul_efficiency.get(gpu_key, coefficients.matmul_efficiency["default"])


def _matmul_rate(cluster: ClusterSpec, dtype: str, coefficients: CostCoefficients) -> float:
    """Achievable matmul FLOP/s: dense peak for the dtype × the GPU's fitted efficiency.

    ``fp32-simt`` is the non-tensor fp32 rate (fp32 SDPA / fp32 lm_head without TF32)."""
    gpu = cluster.gpu
    peak = gpu.fp32_tflops if dtype == "fp32-simt" else gpu.matmul_tflops(dtype)
    return peak * TERA * matmul_efficiency(gpu.key, coefficients)


def _attention_dtype(dtypes: DtypeBytes) -> str:
    """fp32 attention when the residual stream is fp32 without autocast (QLoRA with fp32 unquantized parts,
    full fp32): SDPA then runs fp32 CUDA-core kernels (PyTorch leaves TF32 off for matmuls by default)."""
    return "fp32-simt" if dtypes.residual_bytes == 4 and not dtypes.autocast else dtypes.compute_dtype


def predict_time(
    model: ModelSpec,
    setting: TrainingSetting,
    cluster: ClusterSpec,
    workload: Workload,
    coefficients: CostCoefficients,
) -> TimePrediction:
    """Micro-step, optimizer-step and optimizer-step-cycle times for one rank (formulas in the module docstring)."""
    gpu = cluster.gpu
    dtypes = dtype_bytes(setting, gpu)
    counts = count_params(model)
    ranks = cluster.world_size
    seq = workload.tokens_per_sequence
    tokens = setting.micro_batch_size * seq
    flash = setting.attention_impl == "flash" and gpu.supports_flash_attention
    bandwidth = gpu.memory_bandwidth_gb_per_s * GB * coefficients.bandwidth_efficiency
    compute_rate = _matmul_rate(cluster, dtypes.compute_dtype, coefficients)
    adapters = setting.uses_adapters

    # --- matmul passes (roofline per pass) -------------------------------------------------------
    layer_matmul_params = (
        counts.matmul_params_per_token
        - counts.lm_head_params
        - (counts.embedding_params if model.tie_word_embeddings else 0)
    )
    lm_head_matmul_params = counts.matmul_params_per_token - layer_matmul_params
    fp32_head = act.logits_dtype_bytes(setting, dtypes) == 4 and not dtypes.autocast
    lm_head_rate = _matmul_rate(cluster, "fp32-simt", coefficients) if fp32_head else compute_rate
    if setting.method == "qlora":
        weight_read_bytes = counts.decoder_linear_params * (nf4_bytes_per_param(setting.qlora_double_quant) + 4.0)
    else:
        weight_read_bytes = counts.total_params * dtypes.compute_bytes
    forward_passes = 1 + (1 if setting.grad_ckpt else 0)
    backward_passes = 1 if adapters else 2  # dX, plus dW when weights train
    layer_flops_pass = 2 * layer_matmul_params * tokens
    lm_head_flops_pass = 2 * lm_head_matmul_params * tokens
    pass_time = max(layer_flops_pass / compute_rate, weight_read_bytes / bandwidth)
    matmul_s = pass_time * (forward_passes + backward_passes)
    # A chunked loss checkpoints each chunk: its lm_head matmul runs again in backward.
    lm_head_passes = 1 + backward_passes + (1 if setting.loss_impl == "chunked" else 0)
    lm_head_s = lm_head_flops_pass / lm_head_rate * lm_head_passes
    if adapters:
        lora = lora_params(model, setting.lora_rank, setting.lora_targets)
        matmul_s += 2 * lora * tokens * (forward_passes + 2) / compute_rate

    # --- attention scores ----------------------------------------------------------------------------
    attention_context = seq / 2 if flash else seq
    attention_forward_flops = (
        model.num_hidden_layers * 4 * model.num_attention_heads * model.head_dim * attention_context * tokens
    )
    attention_rate = _matmul_rate(cluster, _attention_dtype(dtypes), coefficients)
    attention_s = attention_forward_flops * (forward_passes + FLASH_BACKWARD_FACTOR) / attention_rate

    # --- element-wise traffic and dispatch -----------------------------------------------------------
    layer = act.layer_activation_bytes_per_token(model, setting, dtypes, seq, flash)
    elementwise_bytes = layer.total * model.num_hidden_layers * tokens * (ELEMENTWISE_TRANSFERS + forward_passes - 1)
    # Every logit crosses DRAM in forward and backward whether or not the loss is chunked.
    logits_bytes = act.loss_bytes_per_logit(model, setting, dtypes) * tokens * model.vocab_size * 2
    elementwise_s = (elementwise_bytes + logits_bytes) / bandwidth
    num_targets = 0
    if adapters:
        num_targets = len(lora_target_modules(model, setting.lora_targets))
    ops_forward = model.num_hidden_layers * (OPS_PER_LAYER_FORWARD + OPS_PER_ADAPTER_FORWARD * num_targets)
    dispatch_s = ops_forward * (forward_passes + BACKWARD_OPS_FACTOR) * coefficients.kernel_launch_s
    if setting.compile:
        elementwise_s *= 1 - coefficients.compile_speedup
        dispatch_s *= 1 - coefficients.compile_speedup

    gpu_s = matmul_s + lm_head_s + attention_s + elementwise_s
    compute_s = max(gpu_s, dispatch_s)
    if adapters:
        compute_s *= coefficients.adapter_time_factor
    if setting.method == "qlora":
        compute_s *= coefficients.qlora_time_factor

    # --- communication and offload per micro-step ----------------------------------------------------
    link = _link_bytes_per_s(cluster)
    host_link = gpu.host_link_gb_per_s * GB * coefficients.host_link_efficiency
    full_weight_bytes = base_weight_bytes(model, counts, setting, dtypes)
    trainable = lora_params(model, setting.lora_rank, setting.lora_targets) if adapters else counts.total_params
    grad_bytes = trainable * dtypes.grad_bytes
    per_micro_comm_s = 0.0
    per_step_comm_s = 0.0
    if ranks > 1:
        fraction = (ranks - 1) / ranks
        gathered_bytes = full_weight_bytes if not dtypes.autocast else counts.total_params * dtypes.compute_bytes
        if setting.shards_parameters:
            per_micro_comm_s = fraction * (2 * gathered_bytes + grad_bytes) / link
        elif setting.sharding == "zero2":
            per_micro_comm_s = fraction * grad_bytes / link
            per_step_comm_s = fraction * gathered_bytes / link
        elif setting.sharding == "ddp":
            per_step_comm_s = 2 * fraction * grad_bytes / link
    offload_s = 0.0
    if setting.offloads_to_cpu:
        offload_s = (2 * full_weight_bytes / ranks + grad_bytes / ranks) / host_link
    hidden = COMM_OVERLAP * compute_s
    exposed_s = max(0.0, per_micro_comm_s + offload_s - hidden)
    micro_step_s = compute_s + exposed_s

    # --- optimizer step --------------------------------------------------------------------------------
    trainable_per_rank = trainable / ranks if setting.sharding not in ("none", "ddp") else trainable
    if setting.offloads_to_cpu:
        optimizer_s = trainable_per_rank / coefficients.cpu_adam_params_per_s
        optimizer_s += trainable_per_rank * dtypes.weight_bytes / host_link
    else:
        touched = 2 * dtypes.weight_bytes + dtypes.grad_bytes + 2 * dtypes.optimizer_bytes
        touched += 2 * dtypes.optimizer_temp_bytes
        optimizer_s = trainable_per_rank * touched / bandwidth
    exposed_step_comm_s = max(0.0, per_step_comm_s - COMM_OVERLAP * compute_s)
    optimizer_s += exposed_step_comm_s
    step_s = setting.grad_accum * micro_step_s + optimizer_s

    model_flops = tokens * (
        6 * counts.matmul_params_per_token
        + 12 * model.num_hidden_layers * model.num_attention_heads * model.head_dim * seq
    )
    return TimePrediction(
        micro_step_time_s=micro_step_s,
        optimizer_time_s=optimizer_s,
        step_time_s=step_s,
        model_flops_per_micro_step=model_flops,
        breakdown_s={
            "matmuls": matmul_s + lm_head_s,
            "attention": attention_s,
            "element-wise + loss": elementwise_s,
            "cpu dispatch": dispatch_s,
            "exposed communication": exposed_s,
        },
    )
