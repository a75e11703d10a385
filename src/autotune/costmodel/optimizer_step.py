"""The optimizer step: per-step GPU AdamW, or CPU Adam under offload with the updated weights' return.

* GPU AdamW: max(bytes AdamW touches / achievable DRAM bandwidth + kernel launches · ``GPU_KERNEL_MIN_S``,
  CPU dispatch calls · ``kernel_launch_s``); calls and launches counted for foreach AdamW + gradient clipping
  (``dispatch.optimizer_launches``) over the trainable tensors of one rank (FSDP / ZeRO flatten a unit into one).
  Stepped inside the backward (``optimizer_in_backward``): the same bytes, but one optimizer per parameter, so the
  per-tensor (for-loop) AdamW's calls and launches, and no clipping; the step still runs on the compute stream
  between the backward's kernels, so it is added, not hidden.
* bf16 stochastic rounding (``bf16_stochastic_rounding``): torchao's ``_AdamW`` steps each parameter through one
  ``torch.compile``'d function (``torchao/optim/adam.py`` ``single_param_adam``: fp32 arithmetic, the moments updated
  in place, the weight rounded and written back in one fused kernel, its random bits drawn in the kernel): no
  temporary buffer (``precision.dtype_bytes``), the moments read and written, the weight read and written, the
  gradient read (and read again by the Trainer's clipping). Per parameter a ``step += 1`` and the fused kernel (two
  launches), and one compiled call on the CPU, priced at ``TORCHAO_STEP_CALL_S`` in place of eager dispatch.
* CPU offload: the optimizer runs on the host — trainable parameters per rank × ranks per node /
  ``cpu_adam_params_per_s`` (DeepSpeed's vectorized CPU-Adam; every rank of a node steps at once on the same host
  cores and DRAM, so the rate is the node's), ``TORCH_CPU_ADAM_TIME_RATIO`` slower for FSDP's torch AdamW — and the
  updated weights return over the pinned host link (``host_link_efficiency``). The per-micro-step weight and
  gradient streaming is ``offload``'s.
"""

from __future__ import annotations

from autotune.costmodel.dispatch import optimizer_launches
from autotune.costmodel.params import LinearModule, LoraLayout
from autotune.costmodel.precision import DtypeBytes
from autotune.costmodel.priors import GPU_KERNEL_MIN_S, TORCH_CPU_ADAM_TIME_RATIO
from autotune.schemas.calibration import CostCoefficients
from autotune.schemas.hardware import GpuSpec
from autotune.schemas.model import ModelSpec
from autotune.schemas.setting import TrainingSetting
from autotune.units import GB


def trainable_tensors(
    model: ModelSpec,
    setting: TrainingSetting,
    *,
    modules: tuple[LinearModule, ...],
    lora: LoraLayout,
) -> int:
    """Tensors the optimizer updates on one rank (FSDP / ZeRO flatten each decoder-layer unit into one).

    ``modules`` and ``lora``: the model's linears and the setting's adapters, as counted once
    (``SettingContext.linear_modules``, ``SettingContext.lora``).
    """
    if setting.uses_adapters:
        return sum(a.tensors for a in lora.adapters)
    if setting.shards_states:
        return model.num_hidden_layers + 1
    per_layer = sum((1 + int(m.bias)) * m.count for m in modules) // model.num_hidden_layers
    per_layer += model.norms_per_layer * (2 if model.norm_has_bias else 1)
    return model.num_hidden_layers * per_layer + 2 + int(not model.tie_word_embeddings)


def dram_bytes_per_s(gpu: GpuSpec, coefficients: CostCoefficients) -> float:
    """Achievable DRAM bandwidth per GPU, bytes/s: the datasheet bandwidth × ``bandwidth_efficiency``."""
    return gpu.memory_bandwidth_gb_per_s * GB * coefficients.bandwidth_efficiency


def host_link_bytes_per_s(gpu: GpuSpec, coefficients: CostCoefficients) -> float:
    """Achievable pinned host-link bandwidth per GPU, bytes/s."""
    return gpu.host_link_gb_per_s * GB * coefficients.host_link_efficiency


TORCHAO_STEP_CALL_S = 1.26e-3
"""CPU seconds of one parameter's step in torchao's ``_AdamW(bf16_stochastic_round=True)``: the ``step += 1`` and one
call of the compiled ``single_param_adam`` (torchao calls ``torch.compile`` on it for every parameter, then dynamo's
guards and the inductor wrapper run). Measured on this project's CPU host (2 shared cores, torch 2.13, torchao 0.18:
1,264 µs) by ``python benchmarks/sr_step_overhead.py``; a GPU host's faster, unshared cores take less: a bound from
above, a named debt until the GPU sweep measures the lever."""
ROUNDED_STEP_LAUNCHES_PER_TENSOR = 2
"""GPU kernels per parameter of torchao's step: ``state["step"] += 1`` and the compiled fused update."""


def optimizer_step_s(
    model: ModelSpec,
    setting: TrainingSetting,
    gpu: GpuSpec,
    dtypes: DtypeBytes,
    trainable_per_rank: float,
    coefficients: CostCoefficients,
    ranks_per_node: int = 1,
    *,
    tensors: int,
) -> float:
    """Seconds of one optimizer step on one rank, without the fixed per-step overhead (module docstring).

    ``ranks_per_node``: ranks whose CPU optimizers share one host under offload. ``tensors``: the trainable tensors
    (:func:`trainable_tensors`, counted once by the caller).
    """
    if setting.offloads_to_cpu:
        cpu_rate = coefficients.cpu_adam_params_per_s
        updated = trainable_per_rank * dtypes.weight_bytes / host_link_bytes_per_s(gpu, coefficients)
        if setting.sharding == "fsdp-offload":
            # FSDP's CPU offload steps torch.optim.AdamW on the host: the same foreach ops as on the GPU, each
            # dispatched by the same Python / dispatcher path, so it is never faster than their dispatch.
            cpu_step = trainable_per_rank * ranks_per_node / (cpu_rate / TORCH_CPU_ADAM_TIME_RATIO)
            calls, _ = optimizer_launches(tensors, foreach=True)
            return max(cpu_step, calls * coefficients.kernel_launch_s) + updated
        return trainable_per_rank * ranks_per_node / cpu_rate + updated
    bandwidth = dram_bytes_per_s(gpu, coefficients)
    if setting.bf16_stochastic_rounding:
        return rounded_step_s(setting, dtypes, trainable_per_rank, tensors, bandwidth, coefficients)
    touched = 2 * dtypes.weight_bytes + 2 * dtypes.grad_bytes + 2 * dtypes.optimizer_bytes
    touched += 2 * dtypes.optimizer_temp_bytes
    # in the backward each parameter is stepped alone by its hook (one optimizer per parameter), unclipped
    in_backward = setting.optimizer_in_backward
    calls, launches = optimizer_launches(tensors, foreach=not in_backward, clip=not in_backward)
    gpu_step = trainable_per_rank * touched / bandwidth + launches * GPU_KERNEL_MIN_S
    return max(gpu_step, calls * coefficients.kernel_launch_s)


def rounded_step_s(
    setting: TrainingSetting,
    dtypes: DtypeBytes,
    trainable_per_rank: float,
    tensors: int,
    bandwidth: float,
    coefficients: CostCoefficients,
) -> float:
    """Seconds of torchao's stochastically rounded AdamW step on one rank (module docstring).

    Bytes per parameter: weight and moments read and written (2 × (``weight_bytes`` + ``optimizer_bytes``)), the
    gradient read once, and once more by the Trainer's gradient clipping unless the optimizer steps in the backward
    (which clips nothing). GPU: those bytes / ``bandwidth`` + ``ROUNDED_STEP_LAUNCHES_PER_TENSOR`` launches per
    tensor (+ clipping's); CPU: ``TORCHAO_STEP_CALL_S`` per tensor (+ clipping's calls × ``kernel_launch_s``).
    """
    clip = not setting.optimizer_in_backward
    touched = 2 * dtypes.weight_bytes + (2 if clip else 1) * dtypes.grad_bytes + 2 * dtypes.optimizer_bytes
    clip_calls, clip_launches = optimizer_launches(tensors, foreach=True, clip=clip)
    plain_calls, plain_launches = optimizer_launches(tensors, foreach=True, clip=False)
    clip_calls, clip_launches = clip_calls - plain_calls, clip_launches - plain_launches
    launches = tensors * ROUNDED_STEP_LAUNCHES_PER_TENSOR + clip_launches
    gpu_step = trainable_per_rank * touched / bandwidth + launches * GPU_KERNEL_MIN_S
    return max(gpu_step, tensors * TORCHAO_STEP_CALL_S + clip_calls * coefficients.kernel_launch_s)


def optimizer_paging_s(paged_bytes: float, free_bytes: float, gpu: GpuSpec, coefficients: CostCoefficients) -> float:
    """Seconds per optimizer step of moving a paged optimizer's states over the host link, 0 when they stay on the GPU.

    ``paged_bytes``: the states in managed memory (``memory.paged_optimizer_bytes``); ``free_bytes``: the card's
    memory left beside the CUDA context and the caching allocator's reserved peak. When the states do not fit there,
    the driver evicts pages to the host (CUDA C++ Programming Guide, "Unified Memory": oversubscription), and every
    step the optimizer touches them all: bitsandbytes prefetches each parameter's states before its update
    (``Optimizer8bit.prefetch_state`` → ``F.prefetch_tensor``, ``cudaMemPrefetchAsync``), so the overflow comes in
    and, to make room, as much goes out. PCIe is full duplex (``host_link_gb_per_s`` is per direction), so the two
    streams overlap: overflow / the achievable pinned host-link bandwidth (``host_link_efficiency``). A prefetch of
    managed memory may be slower than a pinned copy, and eviction may not overlap fully: a bound from below, to be
    measured (``benchmarks/gpu_sweep.py`` entry ``levers-full-8b``).
    """
    overflow = max(0.0, paged_bytes - max(0.0, free_bytes))
    return overflow / host_link_bytes_per_s(gpu, coefficients) if overflow else 0.0
