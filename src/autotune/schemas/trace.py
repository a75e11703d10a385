"""What ``autotune trace`` reports: live tensor bytes per phase of one traced training step, and op counts.

Produced by ``autotune.trace`` (needs torch); read by the CLI and ``plan --verify`` without torch.
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import Field

from autotune.schemas._base import StrictModel

TraceCategory = Literal[
    "weights",
    "adapters",
    "gradients",
    "optimizer states",
    "saved activations",
    "recomputed activations",
    "logits + loss",
    "temporaries",
]
"""A category of live bytes in a traced step (each maps to one memory part: ``schemas.memory_parts``)."""

CATEGORIES: tuple[str, ...] = get_args(TraceCategory)
"""Categories of live bytes, in display order (how each storage is classified: ``trace/__init__.py``)."""


class OpClassStats(StrictModel):
    """Ops of one class dispatched in one phase (views excluded)."""

    count: int = Field(ge=0, description="aten ops dispatched.")
    flops: int = Field(ge=0, description="FLOPs by torch.utils.flop_counter's formulas (matmul, attention).")
    bytes_moved: int = Field(ge=0, description="Bytes of all tensor inputs read plus outputs written.")


class PhaseTrace(StrictModel):
    """The peak of live tensor bytes in one phase and what was alive then."""

    name: str = Field(description="forward, backward or optimizer step.")
    peak_bytes: int = Field(ge=0, description="Largest sum of live storage bytes during the phase.")
    peak_cuda_bytes: int = Field(ge=0, description="The same storages, each rounded up to 512 B (CUDA allocator).")
    categories_bytes: dict[str, int] = Field(description="Live bytes at the peak by category.")
    ops: dict[str, OpClassStats] = Field(description="Op class → count, FLOPs, bytes moved over the phase.")


class TraceReport(StrictModel):
    """One traced training step of one micro batch on one rank."""

    model: str
    setting_summary: str
    seq_len: int
    micro_batch_size: int
    phases: list[PhaseTrace]
    peak_bytes: int = Field(ge=0, description="Largest phase peak (CPU trace, exact storage sizes).")
    peak_phase: str
    cuda_workspace_bytes: int = Field(ge=0, description="cuBLAS / cuBLASLt workspaces the CUDA run adds.")
    cuda_peak_allocated_bytes: int = Field(
        ge=0, description="Predicted torch.cuda.max_memory_allocated: 512 B-rounded peak + workspaces + sharding."
    )
    sharding_adjustment_bytes: int = Field(
        default=0, description="Per-rank model-state change from sharding / DDP buckets (byte arithmetic)."
    )
    paged_optimizer_bytes: int = Field(
        ge=0, description="Paged optimizer state in CUDA unified memory (outside the allocator's counters)."
    )
    trainable_params: int = Field(ge=0)
    total_params: int = Field(ge=0)
    elapsed_s: float = Field(ge=0, description="Wall time of the trace on this machine.")
    notes: list[str] = Field(default_factory=list)
