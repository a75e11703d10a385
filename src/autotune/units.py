"""Named constants and unit conversions.

Byte sizes of dtypes are those of the IEEE / bfloat16 formats; NF4 sizes come from Dettmers et al.
2023, "QLoRA: Efficient Finetuning of Quantized LLMs", section 2 (4-bit NormalFloat, block size 64,
double quantization of the fp32 absmax constants to 8 bits with a second block size of 256).
All memory inside the cost model is in bytes; GiB appear only in schemas meant for display.
"""

from __future__ import annotations

from typing import Final

GIB: Final[int] = 2**30
"""Bytes in one GiB (what PyTorch's memory statistics and nvidia-smi's MiB columns count in)."""

GB: Final[int] = 10**9
"""Bytes in one decimal GB (datasheet bandwidths, marketing capacities)."""

TERA: Final[float] = 1e12

BYTES_PER_DTYPE: Final[dict[str, float]] = {
    "fp32": 4.0,
    "tf32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "int8": 1.0,
    "nf4": 0.5,
}
"""Storage bytes per element of each dtype."""

NF4_BLOCK_SIZE: Final[int] = 64
"""Elements per first-level quantization block (Dettmers et al. 2023, section 2)."""

NF4_DOUBLE_QUANT_BLOCK_SIZE: Final[int] = 256
"""First-level constants per second-level block under double quantization (same source)."""


def nf4_bytes_per_param(double_quant: bool = True) -> float:
    """Bytes per quantized weight in NF4, constants included.

    Without double quantization each block of 64 weights stores one fp32 absmax: 0.5 + 4/64 bytes
    (4.5 bits). With it, absmax values are stored as int8 plus one fp32 constant per 256 of them:
    0.5 + 1/64 + 4/(64*256) bytes (≈4.127 bits). Source: Dettmers et al. 2023, section 2,
    "Double Quantization" (the paper's 0.127 bits per parameter figure).
    """
    if double_quant:
        return 0.5 + 1.0 / NF4_BLOCK_SIZE + 4.0 / (NF4_BLOCK_SIZE * NF4_DOUBLE_QUANT_BLOCK_SIZE)
    return 0.5 + 4.0 / NF4_BLOCK_SIZE


def human_duration(seconds: float | None) -> str:
    """'3 h 12 min', '45 s' ... for display."""
    if seconds is None:
        return "—"
    if seconds < 120:
        return f"{seconds:.1f} s"
    minutes = seconds / 60
    if minutes < 120:
        return f"{minutes:.0f} min"
    hours = minutes / 60
    if hours < 48:
        return f"{int(hours)} h {int(minutes % 60):02d} min"
    return f"{hours / 24:.1f} days"
