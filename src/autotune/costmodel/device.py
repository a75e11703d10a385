"""The GPU as the time model sees it: achievable FLOP/s per dtype and bytes/s, built once per GPU and coefficients.

A :class:`DeviceContext` holds the GEMM device (``gemm.GemmDevice``: the datasheet peak of a dtype ×
the fitted efficiency of the GPU or its generation, the SM count, the achievable DRAM bandwidth) of every dtype
for matmuls (``CostCoefficients.matmul_efficiency``) and for attention (``attention_efficiency``), and the
achievable DRAM bandwidth (``optimizer_step.dram_bytes_per_s``). Every time term reads its device from here.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from autotune.costmodel.gemm import GemmDevice
from autotune.costmodel.optimizer_step import dram_bytes_per_s
from autotune.costmodel.precision import DtypeBytes
from autotune.costmodel.priors import DEFAULT_SM_COUNT
from autotune.schemas.calibration import CostCoefficients
from autotune.schemas.hardware import GpuSpec
from autotune.units import TERA

FP32_SIMT = "fp32-simt"
"""The dtype key of fp32 on CUDA cores (no TF32): ``GpuSpec.fp32_tflops``."""

DEVICE_DTYPES = ("bf16", "fp16", "fp32", FP32_SIMT)
"""The dtypes a GEMM or attention kernel runs in: the compute dtypes (``precision.DtypeBytes.compute_dtype``) and
fp32 on CUDA cores."""


def architecture_generation(gpu: GpuSpec) -> str:
    """The GPU's architecture generation (``GpuSpec.generation``): 'ampere', 'hopper', 'ada', …."""
    return gpu.generation


def efficiency(table: dict[str, float], gpu: GpuSpec) -> float:
    """A per-GPU coefficient: the GPU's own value, else its architecture generation's, else 'default'."""
    if gpu.key in table:
        return table[gpu.key]
    return table.get(gpu.generation, table["default"])


def gemm_device(gpu: GpuSpec, dtype: str, table: dict[str, float], bandwidth_bytes_per_s: float) -> GemmDevice:
    """The :class:`GemmDevice` of ``dtype`` on ``gpu``: datasheet TFLOP/s × ``efficiency(table, gpu)``.

    ``dtype`` 'fp32-simt' is fp32 on CUDA cores (``GpuSpec.fp32_tflops``), the others ``GpuSpec.matmul_tflops``.
    """
    peak = gpu.fp32_tflops if dtype == FP32_SIMT else gpu.matmul_tflops(dtype)
    return GemmDevice(peak * TERA * efficiency(table, gpu), gpu.sm_count or DEFAULT_SM_COUNT, bandwidth_bytes_per_s)


@dataclass(frozen=True)
class DeviceContext:
    """The facts of one GPU under one set of coefficients that the time terms read.

    Attributes:
        gpu: the GPU.
        dram_bytes_per_s: achievable DRAM bandwidth, bytes/s (``optimizer_step.dram_bytes_per_s``).
        matmul: dtype (:data:`DEVICE_DTYPES`) → GEMM device at ``matmul_efficiency``.
        attention: dtype → attention device at ``attention_efficiency``.
    """

    gpu: GpuSpec
    dram_bytes_per_s: float
    matmul: dict[str, GemmDevice]
    attention: dict[str, GemmDevice]

    def attention_device(self, dtypes: DtypeBytes) -> GemmDevice:
        """The attention kernel's device: fp32 CUDA cores when the residual stream is fp32 without autocast.

        fp32 happens with QLoRA with fp32 unquantized parts and with full fp32: SDPA then runs fp32 CUDA-core
        kernels (PyTorch leaves TF32 off for matmuls by default); else the compute dtype's tensor cores.
        """
        return self.attention[FP32_SIMT if dtypes.residual_bytes == 4 and not dtypes.autocast else dtypes.compute_dtype]


def build_device_context(gpu: GpuSpec, coefficients: CostCoefficients) -> DeviceContext:
    """Build the :class:`DeviceContext` of ``gpu`` under ``coefficients`` (pure; :func:`device_context` reuses it)."""
    bandwidth = dram_bytes_per_s(gpu, coefficients)
    return DeviceContext(
        gpu=gpu,
        dram_bytes_per_s=bandwidth,
        matmul={d: gemm_device(gpu, d, coefficients.matmul_efficiency, bandwidth) for d in DEVICE_DTYPES},
        attention={d: gemm_device(gpu, d, coefficients.attention_efficiency, bandwidth) for d in DEVICE_DTYPES},
    )


_LAST = threading.local()


def device_context(gpu: GpuSpec, coefficients: CostCoefficients) -> DeviceContext:
    """The :class:`DeviceContext` of ``gpu`` and ``coefficients``, built once while the same pair is asked for.

    A plan's walk asks for one GPU and one set of coefficients for every candidate: the last pair's context is kept
    (per thread) and returned while the GPU is the same object and the three coefficients it is built from are equal
    (``CostCoefficients`` holds dicts and is not hashable; comparing the values catches one changed in place).
    """
    key = (coefficients.bandwidth_efficiency, coefficients.matmul_efficiency, coefficients.attention_efficiency)
    last: tuple[GpuSpec, tuple[object, ...], DeviceContext] | None = getattr(_LAST, "entry", None)
    if last is not None and last[0] is gpu and last[1] == key:
        return last[2]
    built = build_device_context(gpu, coefficients)
    _LAST.entry = (gpu, (key[0], dict(key[1]), dict(key[2])), built)
    return built
