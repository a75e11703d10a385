"""GEMM and attention kernel time from their shapes (no torch).

A GEMM ``C[M×N] = A[M×K] · B[K×N]`` (M = tokens per micro-step for the forward and the input-gradient GEMMs,
M = a weight's output width for the weight-gradient GEMM) runs on the GPU as a grid of output tiles, each tile
computed by one SM (NVIDIA, "Matrix Multiplication Background User's Guide", sections "Tile quantization" and
"Wave quantization", docs.nvidia.com/deeplearning/performance/dl-performance-matrix-multiplication):

* **tile quantization** — the grid covers ⌈M/t⌉·⌈N/t⌉ tiles of t×t outputs (``TILE`` = 128, the tile cuBLAS
  picks for large fp16/bf16 GEMMs in the guide's examples); partial tiles cost whole tiles;
* **wave quantization** — tiles run in waves of one tile per SM; ⌈tiles / SMs⌉ waves take as long as full
  waves, so useful work / issued work = M·N / (waves · SMs · t²);
* **split-K** — a grid of fewer tiles than SMs with a long K (LoRA's x·Aᵀ: M = tokens, N = rank 16,
  K = 4096) is split along K over otherwise idle SMs, each slice writing an fp32 partial product that a second
  pass reduces (cuBLAS's split-K heuristics; CUTLASS ``GemmSplitKParallel`` and Hopper's stream-K schedule):
  ``split_k_slices`` slices of at least ``SPLIT_K_MIN_SLICE_ELEMENTS``, the partials' bytes added to the roofline;
* **K saturation** — each tile streams K through a pipelined main loop; its fixed prologue/epilogue is about
  ``GEMM_K_HALF_ELEMENTS`` elements of K, so the main-loop share is K / (K + GEMM_K_HALF_ELEMENTS) (saturating in K);
* **roofline** (Williams et al. 2009) — the kernel takes at least its operand and result bytes at the achievable
  DRAM bandwidth, so skinny GEMMs (small M: LoRA adapters, micro batch 1 at short sequences) are
  bandwidth-bound.

time = max(2·M·N·K / (peak · efficiency · quantization · K-saturation), bytes / bandwidth).
``efficiency`` is the fraction of the dense datasheet peak a large, well-shaped GEMM reaches on the GPU's
architecture (fitted, with a datasheet prior: ``schemas/calibration.py``).

Attention (Dao et al. 2022, FlashAttention; Dao 2023, FlashAttention-2): QKᵀ and PV cost 4·s_ctx·d FLOPs per
query token per head; kernels that take the causal mask (flash and memory-efficient SDPA with ``is_causal``)
skip the masked half of the tiles (s_ctx = s/2), the math / eager path computes and masks all s² scores
(s_ctx = s). The backward recomputes the scores: 2.5× the forward's FLOPs (5 matmuls instead of 2).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from autotune.costmodel.priors import GEMM_K_HALF_ELEMENTS, SPLIT_K_MIN_SLICE_ELEMENTS

TILE = 128
"""Output tile edge (elements) of the GEMM kernels (NVIDIA Matrix Multiplication Background guide, 128×128 and
256×128 tiles for large half-precision GEMMs on A100)."""

FP32_PARTIAL_BYTES = 4
"""Bytes per element of a split-K slice's partial product (accumulated in fp32)."""


@dataclass(frozen=True)
class GemmDevice:
    """What a GEMM needs to know about the GPU: FLOP/s of large GEMMs, SMs, achievable bytes/s."""

    flops_per_s: float
    sm_count: int
    bytes_per_s: float


def tile_edge(dim: float, tile: int = TILE) -> int:
    """Tile edge along one output dimension: ``tile``, or the smallest power of two ≥ 16 covering a skinny dimension.

    cuBLAS picks narrow tiles for skinny GEMMs, e.g. LoRA's rank-16 outputs.
    """
    if dim >= tile:
        return tile
    return max(16, 2 ** math.ceil(math.log2(max(dim, 1))))


def split_k_slices(m: float, n: float, k: float, sm_count: int, tile: int = TILE) -> int:
    """K slices of a GEMM whose output tiles do not fill the SMs (module docstring, split-K).

    As many as idle SMs allow, each at least ``SPLIT_K_MIN_SLICE_ELEMENTS`` long; 1 when the tiles fill a wave.
    """
    tiles = math.ceil(m / tile_edge(m, tile)) * math.ceil(n / tile_edge(n, tile))
    if tiles >= sm_count:
        return 1
    return max(1, min(sm_count // tiles, int(k // SPLIT_K_MIN_SLICE_ELEMENTS)))


def quantization_efficiency(m: float, n: float, sm_count: int, tile: int = TILE, slices: int = 1) -> float:
    """Useful fraction of the issued tile-waves for an M×N output (tile × wave quantization), in (0, 1].

    The output is computed in ``slices`` K slices (split-K).

    Raises:
        ValueError: a non-positive dimension or SM count.
    """
    if m <= 0 or n <= 0 or sm_count <= 0:
        raise ValueError(f"GEMM output {m}×{n} on {sm_count} SMs: dimensions must be positive")
    tile_m, tile_n = tile_edge(m, tile), tile_edge(n, tile)
    tiles = math.ceil(m / tile_m) * math.ceil(n / tile_n) * slices
    waves = math.ceil(tiles / sm_count)
    return (m * n * slices) / (waves * sm_count * tile_m * tile_n)


@functools.lru_cache(maxsize=1 << 16)
def gemm_schedule(m: float, n: float, k: float, sm_count: int) -> tuple[int, float]:
    """(K slices, tile-wave quantization efficiency) of an M×N×K GEMM on ``sm_count`` SMs: shape-only, so memoised.

    A fit evaluates the same rows' GEMMs at every step of its search (about 3 million calls in a ``--with-seeds``
    refit); the schedule does not depend on the coefficients being fitted, only on the shape and the GPU.
    """
    slices = split_k_slices(m, n, k, sm_count)
    return slices, quantization_efficiency(m, n, sm_count, slices=slices)


def gemm_time_s(m: float, n: float, k: float, element_bytes: float, device: GemmDevice) -> float:
    """Seconds for one GEMM of M×K by K×N (module docstring); 0 for an empty GEMM.

    Args:
        m: GEMM dimension M (elements).
        n: GEMM dimension N (elements).
        k: GEMM dimension K (elements).
        element_bytes: bytes per operand element.
        device: the GPU's large-GEMM FLOP/s (peak × fitted efficiency), SMs and achievable DRAM bytes/s.
    """
    if m <= 0 or n <= 0 or k <= 0:
        return 0.0
    slices, quantization = gemm_schedule(m, n, k, device.sm_count)
    slice_k = k / slices
    compute_rate = device.flops_per_s * quantization * (slice_k / (slice_k + GEMM_K_HALF_ELEMENTS))
    flops_s = 2.0 * m * n * k / compute_rate
    partials = 2 * FP32_PARTIAL_BYTES * slices * m * n if slices > 1 else 0.0  # written, then read by the reduction
    bytes_s = (element_bytes * (m * k + k * n + m * n) + partials) / device.bytes_per_s
    return max(flops_s, bytes_s)


def linear_pass_time_s(
    tokens: float, in_features: int, out_features: int, element_bytes: float, device: GemmDevice, kind: str
) -> float:
    """One ``nn.Linear`` GEMM of a pass.

    'forward' Y = X·Wᵀ (M=T, N=out, K=in), 'input-grad' dX = dY·W (M=T, N=in, K=out), 'weight-grad' dW = dYᵀ·X (M=out,
    N=in, K=T).
    """
    if kind == "forward":
        return gemm_time_s(tokens, out_features, in_features, element_bytes, device)
    if kind == "input-grad":
        return gemm_time_s(tokens, in_features, out_features, element_bytes, device)
    if kind == "weight-grad":
        return gemm_time_s(out_features, in_features, tokens, element_bytes, device)
    raise ValueError(f"unknown linear pass {kind!r}: use forward, input-grad or weight-grad")


def attention_flops_forward(
    tokens: float, seq: float, num_heads: int, head_dim: int, causal_skipped: bool, window: float | None = None
) -> float:
    """FLOPs of QKᵀ and PV for ``tokens`` query tokens over sequences of ``seq`` tokens (module docstring).

    ``causal_skipped``: the kernel skips masked tiles (flash / memory-efficient SDPA); ``window``: a sliding
    window bounds the context a query sees (None = no window).
    """
    context = min(seq, window) if window else seq
    if causal_skipped:
        context = context / 2 if not window or window >= seq else context
    return 4.0 * tokens * context * num_heads * head_dim


def attention_time_s(flops: float, seq: float, device: GemmDevice) -> float:
    """Seconds for ``flops`` of attention whose score tiles are ``seq`` long.

    Wave quantization does not apply: one block per query tile per head per sequence fills the GPU at training sizes.
    """
    if flops <= 0:
        return 0.0
    return flops / (device.flops_per_s * (seq / (seq + GEMM_K_HALF_ELEMENTS)))
