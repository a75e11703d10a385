"""The cost model's stated priors: the numbers it assumes that no fit ever moves, each with its source.

The rule for where a number lives:

* **A number a fit may move** is a field of the calibration schema
  (:class:`~autotune.schemas.calibration.CostCoefficients`); its prior is the field's default, its bounds are the
  field's ``ge`` / ``le`` (read by the fitters through :func:`~autotune.schemas.calibration.field_bounds`), and
  the field says ``fitted: true`` in its JSON schema extra.
* **A number no fit ever moves** is a constant of this module: a time, size, count or ratio that is estimated,
  measured once or read off a range in a paper, and that a different reasonable reading of its source could change.
  Its name carries its unit (``_S`` seconds, ``_BYTES``, ``_ELEMENTS``, ``_COUNT`` / ``_PER_…`` counts, ``_RATIO``
  for a ratio of two like quantities) and its docstring cites its source.
* The exceptions are the calibration fields that shipped and user calibration files already hold
  (``kernel_launch_s``, ``micro_step_overhead_s``, ``step_overhead_s``, ``collective_latency_s``,
  ``collective_bandwidth_efficiency``, ``host_link_efficiency``, ``compile_speedup``): no fit moves them, but moving
  them here would break every calibration YAML file, so they stay in the schema marked ``fitted: false``
  (:data:`~autotune.schemas.calibration.PRIOR_FIELDS`).
* A fact that a library's source, a file format or an exact count fixes (dtype widths, a library's default bucket
  size, a cuBLAS workspace, the kernels an eager op launches) is not a prior: it lives beside the code that models
  that library, with its source.
"""

from __future__ import annotations

# --- time ---------------------------------------------------------------------------------------------------

GPU_KERNEL_MIN_S = 3e-6
"""Time a launched kernel occupies the GPU beyond its work (launch latency + ramp-up + tail; ~2–4 µs on current
GPUs: the back-to-back empty-kernel rate of CUDA's launch-latency measurements, e.g. NVIDIA's "CUDA Graphs"
blog post, 2019: ~2 µs launch + ~1 µs execution of an empty kernel). Stated prior, not fitted."""

COMPILE_FIXED_S = 20.0
COMPILE_PER_LAYER_S = 2.0
"""torch.compile time prior: ~20 s of set-up plus ~2 s per decoder layer traced (Dynamo inlines the whole
model forward; observed 1–2 minutes for 7–8B models in the PyTorch 2.x release notes' benchmarks). Not
fitted: no seed row states a compile time."""

TORCH_CPU_ADAM_TIME_RATIO = 5.5
"""FSDP CPU offload steps ``torch.optim.AdamW`` on the host; DeepSpeed's vectorized CPU-Adam is 5.1–6.4× faster
(Ren et al. 2021, ZeRO-Offload, §4.1 / table 3): torch's CPU AdamW time over DeepSpeed's on the same parameters.
``cpu_adam_params_per_s`` is DeepSpeed's rate."""

HEAD_KERNELS_PER_MICRO_STEP = 40
"""Kernels outside the decoder layers per micro-step (embedding, final norm, lm_head, shift + cross-entropy
and its backward): a stated prior; the layer counts dominate (≥ 30 layers × 40+ kernels)."""

# --- GEMM and attention kernels ------------------------------------------------------------------------------

GEMM_K_HALF_ELEMENTS = 32
"""K at which a tile's main loop is half of its time (prologue + epilogue ≈ one 32-wide K slice of the
multistage main loop, CUTLASS's K tile for 16-bit GEMMs). Stated prior, not fitted."""

SPLIT_K_MIN_SLICE_ELEMENTS = 256
"""Shortest K slice a split-K GEMM gives one tile (8 of CUTLASS's 32-wide K steps: below it the fp32 partial
product costs more traffic than the slice saves). Stated prior, not fitted."""

DEFAULT_SM_COUNT = 108
"""SMs assumed for a GPU whose profile does not state them: an A100's 108 (NVIDIA A100 datasheet / whitepaper)."""

FLASH_BACKWARD_FLOPS_RATIO = 2.5
"""Flash-attention backward FLOPs over its forward (Dao et al. 2022, section 3.1 / appendix B.4)."""

TRITON_FLASH_ATTENTION_TIME_RATIO = 1.8
"""Forward + backward time of FlashAttention written in Triton over FlashAttention-2 on the same work (attention
impl ``flash-triton``). Dao 2023, "FlashAttention-2" (arXiv:2307.08691), section 4.1: FlashAttention-2 is
1.3-2.5x faster than FlashAttention in Triton (A100, forward + backward, head dim 64 / 128, causal and not,
sequence 512-16k). 1.8 is the geometric middle of that range (sqrt(1.3 x 2.5)), chosen before it was compared with
any measurement and not fitted; the range bounds it. No figure is published for H100: the same ratio is assumed."""

MEM_EFFICIENT_ATTENTION_TIME_RATIO = 2.0
"""Forward + backward time of PyTorch SDPA's memory-efficient backend (xformers' cutlass kernel) over FlashAttention-2
on the same FLOPs: the masked SDPA path (``context.masked_attention_share``), where an explicit ``attn_mask`` rules
the flash backend out. Dao 2023, "FlashAttention-2" (arXiv:2307.08691), §4.1 (figs. 4–6, A100, head dim 64 / 128,
sequence 512–16k): "FlashAttention-2 is around 2× faster than FlashAttention and FlashAttention in xformers (the
'cutlass' implementation)", against 1.7–3.0× over FlashAttention over the whole benchmark (§4): 2.0 as stated,
1.7–3.0 its range. Not fitted; no H100 figure is published for the cutlass kernel: the same ratio is assumed."""

# --- memory -------------------------------------------------------------------------------------------------

CUDA_CONTEXT_BYTES = 0.5 * 2**30
"""CUDA/ROCm context, cuBLAS workspaces and kernels outside the caching allocator: ~300–600 MiB on
recent drivers with lazy module loading (PyTorch CUDA semantics notes); 0.5 GiB is our stated prior."""
