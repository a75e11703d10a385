"""One setting → one :class:`~autotune.schemas.estimate.Estimate` (memory, time, fit, uncertainty)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from autotune.costmodel.calibration import default_coefficients, error_band
from autotune.costmodel.context import SettingContext, setting_context
from autotune.costmodel.device import device_context
from autotune.costmodel.eval_time import eval_time_s
from autotune.costmodel.evidence import with_evidence
from autotune.costmodel.memory import MemoryPrediction, predict_memory_in
from autotune.costmodel.optimizer_step import optimizer_paging_s
from autotune.costmodel.priors import COMPILE_FIXED_S, COMPILE_PER_LAYER_S, CUDA_CONTEXT_BYTES
from autotune.costmodel.step_time import predict_time_in, with_optimizer_paging
from autotune.costmodel.time_correction import correction_at, time_band
from autotune.schemas.calibration import CostCoefficients
from autotune.schemas.estimate import Estimate
from autotune.schemas.hardware import ClusterSpec
from autotune.schemas.memory_parts import MODELLED_PARTS
from autotune.schemas.model import ModelSpec
from autotune.schemas.setting import TrainingSetting
from autotune.schemas.workload import Workload
from autotune.units import GIB, TERA


def compile_time_s(model: ModelSpec) -> float:
    """One-off torch.compile time in seconds (prior in ``COMPILE_FIXED_S`` / ``COMPILE_PER_LAYER_S``)."""
    return COMPILE_FIXED_S + COMPILE_PER_LAYER_S * model.num_hidden_layers


def dynamic_memory_gib(breakdown_bytes: Mapping[str, float]) -> float:
    """GiB of the peak that is modelled rather than counted (``MODELLED_PARTS``).

    The error band applies to this part only: the counted parts are exact products of parameter counts and
    bytes per parameter, so the residuals against measurements come from the modelled part.
    """
    return sum(value for name, value in breakdown_bytes.items() if name in MODELLED_PARTS) / GIB


def banded_peak_bytes(phases_bytes: Mapping[str, Mapping[str, float]], band: float) -> float:
    """The largest phase once ``band`` × its modelled part is added to each: max over phases of total + band × modelled.

    A phase whose point prediction is below the peak can still exceed it within its band (e.g. the start of
    backward, with activations and logits, beside the end of a compiled backward, made of counted gradients), so
    the band is applied phase by phase. Bytes; equals the peak phase's total + band × its modelled part when that
    phase also has the largest banded total.
    """
    return max(
        (sum(parts.values()) + band * dynamic_memory_gib(parts) * GIB for parts in phases_bytes.values()),
        default=0.0,
    )


def memory_family(setting: TrainingSetting) -> str:
    """Key for the per-family error bands: method, plus the offload implementation or 'sharded' when states move.

    The offload implementation is 'fsdp-offload' (FSDP's CPUOffload) or 'zero3-offload' (DeepSpeed ZeRO-Offload) —
    different code that keeps different buffers on the GPU, so one's residuals say nothing about the other.
    """
    if setting.offloads_to_cpu:
        return f"{setting.method}-{setting.sharding}"
    if setting.shards_states:
        return f"{setting.method}-sharded"
    return setting.method


def time_uncertainty(context: SettingContext, coefficients: CostCoefficients, family: str) -> float:
    """± relative time band of a setting.

    The local correction's 80 % band at the setting (``time_correction.time_band``: narrow near the calibration's
    rows, wider away from them) where the calibration has one, else the family's band.
    """
    local = correction_at(context, coefficients)
    return error_band(coefficients.time_error_band, family) if local is None else time_band(local[1])


def estimate_setting(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: Workload,
    setting: TrainingSetting,
    coefficients: CostCoefficients | None = None,
    *,
    evidence: bool = True,
) -> Estimate:
    """Predict peak memory per GPU, step time and throughput for one setting.

    Args:
        model: architecture.
        cluster: GPUs.
        workload: seq_len, global batch, dataset size.
        setting: the full setting (micro batch and accumulation are taken as given).
        coefficients: fitted calibration (default: the shipped seed-table fit).
        evidence: label the estimate, widen its band and hold it at the MFU cap (``costmodel.evidence``); False
            gives the model's own prediction (what calibration compares with measured rows).

    Returns:
        The Estimate; ``total_time_s`` counts every optimizer step, the compilation and the eval losses the
        workload schedules (``costmodel.eval_time``); ``fits`` as :func:`memory_fit` (allocated, not reserved, must
        fit: the caching allocator frees cached blocks and retries before it reports out-of-memory).
    """
    coefficients = coefficients or default_coefficients()
    context = setting_context(model, setting, cluster, workload)  # one set of derived facts for memory and time
    memory = predict_memory_in(context, coefficients)
    device = device_context(cluster.gpu, coefficients)  # the GPU under the coefficients, for training and eval
    timing = predict_time_in(context, coefficients, device)
    family = memory_family(setting)
    fit = memory_fit(memory, cluster, family, coefficients)
    gpu = cluster.gpu
    if memory.paged_optimizer_bytes:
        free_bytes = (gpu.memory_gib - fit.reserved_gib) * GIB - CUDA_CONTEXT_BYTES
        paging_s = optimizer_paging_s(memory.paged_optimizer_bytes, free_bytes, gpu, coefficients)
        timing = with_optimizer_paging(timing, paging_s)
    sequences_per_step = setting.sequences_per_step(cluster.world_size)
    tokens_per_step = sequences_per_step * workload.tokens_per_sequence
    tokens_per_s = tokens_per_step / timing.step_time_s
    peak_flops = gpu.matmul_tflops("bf16" if gpu.supports_bf16 else "fp16") * TERA
    mfu = timing.model_flops_per_micro_step * setting.grad_accum / timing.step_time_s / peak_flops
    compile_s = compile_time_s(model) if setting.compile else 0.0
    steps = workload.optimizer_steps(setting, cluster.world_size)
    evals, eval_s = eval_time_s(context, coefficients, steps, device) if steps is not None else (0, 0.0)
    total_s = steps * timing.step_time_s + compile_s + eval_s if steps is not None else None
    estimate = Estimate(
        peak_memory_gib=round(fit.peak_gib, 3),
        peak_reserved_gib=round(fit.reserved_gib, 3),
        memory_breakdown_gib={name: round(value / GIB, 3) for name, value in memory.breakdown_bytes.items()},
        peak_phase=memory.peak_phase,
        cuda_context_gib=round(CUDA_CONTEXT_BYTES / GIB, 3),
        memory_uncertainty_gib=round(fit.uncertainty_gib, 3),
        memory_headroom_gib=round(fit.headroom_gib, 3),
        gpu_memory_gib=gpu.memory_gib,
        fits=fit.fits,
        host_memory_gib=round(fit.host_gib, 3),
        micro_step_time_s=timing.micro_step_time_s,
        optimizer_time_s=timing.optimizer_time_s,
        step_time_s=timing.step_time_s,
        tokens_per_s=tokens_per_s,
        mfu=mfu,
        time_uncertainty_fraction=time_uncertainty(context, coefficients, family),
        compile_time_s=compile_s,
        total_time_s=total_s,
        num_optimizer_steps=steps,
        eval_time_s=eval_s if evals else None,
        num_evals=evals if evals else None,
        time_breakdown_s={name: round(value, 6) for name, value in timing.breakdown_s.items()},
    )
    return with_evidence(estimate, gpu, setting, coefficients) if evidence else estimate


@dataclass(frozen=True)
class MemoryFit:
    """Whether a setting's memory fits one GPU (and the host), GiB.

    Attributes:
        peak_gib: peak allocated per GPU.
        reserved_gib: reserved by the caching allocator (at most what the card holds beside the CUDA context when
            the setting fits).
        uncertainty_gib: the memory error band on top of the peak (``banded_peak_bytes``).
        headroom_gib: the headroom band on top of the peak.
        fits: peak + CUDA context + headroom within the GPU memory, and the host memory within the node's.
        host_gib: host memory per node (CPU offload).
    """

    peak_gib: float
    reserved_gib: float
    uncertainty_gib: float
    headroom_gib: float
    fits: bool
    host_gib: float


def memory_fit(
    memory: MemoryPrediction, cluster: ClusterSpec, family: str, coefficients: CostCoefficients
) -> MemoryFit:
    """The :class:`MemoryFit` of a memory prediction on ``cluster`` with the bands of ``family`` (``memory_family``).

    ``fits``: peak allocated + CUDA context + the headroom band (90th percentile of past under-prediction of the
    modelled part) must not exceed the GPU memory; offload also needs the host RAM.
    """
    memory_band = error_band(coefficients.memory_error_band, family)
    headroom_band = error_band(coefficients.memory_headroom_band, family)
    gpu = cluster.gpu
    peak_gib = memory.peak_allocated_bytes / GIB
    reserved_gib = memory.reserved_bytes / GIB
    context_gib = CUDA_CONTEXT_BYTES / GIB
    # each band on top of the peak: the largest phase once the band is added to every phase's modelled part
    uncertainty_gib = max(0.0, banded_peak_bytes(memory.phases_bytes, memory_band) / GIB - peak_gib)
    headroom_gib = max(0.0, banded_peak_bytes(memory.phases_bytes, headroom_band) / GIB - peak_gib)
    fits = peak_gib + context_gib + headroom_gib <= gpu.memory_gib
    if fits:
        # The caching allocator cannot reserve more than the card holds: when cudaMalloc fails it frees its
        # cached blocks and retries before raising OOM (c10/cuda/CUDACachingAllocator.cpp,
        # ``release_cached_blocks`` in ``malloc``), so a setting that fits reserves at most what is left
        # beside the CUDA context.
        reserved_gib = min(reserved_gib, gpu.memory_gib - context_gib)
    host_gib = memory.host_bytes_per_node / GIB
    if cluster.host_memory_gib_per_node is not None and host_gib > cluster.host_memory_gib_per_node:
        fits = False
    return MemoryFit(peak_gib, reserved_gib, uncertainty_gib, headroom_gib, fits, host_gib)
