"""The numbers each ``--plot`` picture hands to matplotlib (pure, no matplotlib import).

One helper per picture: ``memory_bars`` (stacked memory breakdown per setting), ``scatter_points``
(predicted vs measured rows, OOM rows placed by ``oom_needs``) and ``sweep_series`` (per-method curves of a
sweep). Tests check these instead of pixels. Memory is in GiB, times in seconds, throughput in tokens/s
over all GPUs. Colours are fixed per memory part / method so that every picture uses the same ones.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from autotune.planner.sweep import SweepResult
from autotune.schemas.estimate import Estimate

if TYPE_CHECKING:
    from autotune.calibration.results import CaseResult
    from autotune.calibration.validation import RowReport

PART_COLOURS: dict[str, str] = {  # keys: schemas.memory_parts.MEMORY_PARTS (a test keeps them equal)
    "weights": "#4C72B0",
    "gathered weights": "#8172B3",
    "autocast weight copies": "#64B5CD",
    "lora adapters": "#55A868",
    "gradients": "#C44E52",
    "compiled backward gradients": "#E8A0A2",
    "ddp buckets": "#DA8BC3",
    "optimizer states": "#DD8452",
    "optimizer step buffers": "#CCB974",
    "activations": "#937860",
    "logits + loss": "#8C8C8C",
    "embedding gradient buffer": "#A8A8A8",
    "cuBLAS workspaces": "#B07AA1",
}
"""One colour per memory part, the same in every picture; the dict order is the stacking order."""
GPU_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")
"""Point colours by GPU in the validation scatter (no red: red marks wrong OOM verdicts)."""
METHOD_COLOURS = {"full": "#C44E52", "lora": "#4C72B0", "qlora": "#55A868"}
FALLBACK_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf")


def colour_for(name: str, table: Mapping[str, str] = PART_COLOURS) -> str:
    """The fixed colour of a memory part / method, or a stable fallback derived from the name."""
    return table.get(name) or FALLBACK_COLOURS[zlib.crc32(name.encode()) % len(FALLBACK_COLOURS)]


@dataclass(frozen=True)
class MemoryBars:
    """What the memory picture stacks: one bar per setting, parts bottom to top, then context and headroom."""

    labels: list[str]
    parts: list[str]
    values_gib: dict[str, list[float]]
    context_gib: list[float]
    headroom_gib: list[float]
    capacity_gib: list[float]

    @property
    def peaks_gib(self) -> list[float]:
        """Sum of the parts of each bar (= the estimate's peak allocated memory)."""
        return [sum(self.values_gib[p][i] for p in self.parts) for i in range(len(self.labels))]

    @property
    def needs_gib(self) -> list[float]:
        """Top of each bar: peak + context + headroom (what must fit in the GPU)."""
        return [p + c + h for p, c, h in zip(self.peaks_gib, self.context_gib, self.headroom_gib, strict=True)]


def memory_bars(estimates: Sequence[tuple[str, Estimate]]) -> MemoryBars:
    """Stack data for ``memory_breakdown_png``: parts in ``PART_COLOURS`` order (unknown parts after, by name).

    Parts that are zero in every setting are left out.

    Raises:
        ValueError: no estimates.
    """
    if not estimates:
        raise ValueError("memory_bars needs at least one estimate")
    present = {name for _, e in estimates for name, gib in e.memory_breakdown_gib.items() if gib > 0}
    parts = [p for p in PART_COLOURS if p in present] + sorted(present - PART_COLOURS.keys())
    return MemoryBars(
        labels=[label for label, _ in estimates],
        parts=parts,
        values_gib={p: [e.memory_breakdown_gib.get(p, 0.0) for _, e in estimates] for p in parts},
        context_gib=[e.cuda_context_gib for _, e in estimates],
        headroom_gib=[e.memory_headroom_gib for _, e in estimates],
        capacity_gib=[e.gpu_memory_gib for _, e in estimates],
    )


@dataclass(frozen=True)
class ScatterPoint:
    """One predicted-vs-measured point; ``kind`` is the memory kind or the time kind of the row."""

    id: str
    gpu: str
    measured: float
    predicted: float
    kind: str


@dataclass(frozen=True)
class OomPoint:
    """A row measured OOM: x = GPU memory (the real need was above it), y = predicted need (peak + context + headroom).

    Above y = x means the model also says it does not fit.
    """

    id: str
    gpu: str
    gpu_memory_gib: float
    predicted_need_gib: float
    verdict_correct: bool


@dataclass(frozen=True)
class ScatterData:
    """The three point sets of the validation picture."""

    memory: list[ScatterPoint] = field(default_factory=list)
    time: list[ScatterPoint] = field(default_factory=list)
    oom: list[OomPoint] = field(default_factory=list)

    @property
    def gpus(self) -> list[str]:
        """GPUs present, sorted (the colour order)."""
        return sorted({p.gpu for p in self.memory} | {p.gpu for p in self.time} | {p.gpu for p in self.oom})


def oom_needs(results: Sequence[CaseResult]) -> dict[str, tuple[float, float]]:
    """For each row measured OOM: id → (GPU memory, predicted peak + context + headroom), GiB."""
    needs = {}
    for r in results:
        if r.oom_measured:
            e = r.estimate
            needs[r.id] = (e.gpu_memory_gib, e.gpu_memory_need_gib)
    return needs


def scatter_points(rows: Sequence[RowReport], oom: Mapping[str, tuple[float, float]] | None = None) -> ScatterData:
    """Points for ``validation_scatter_png``: rows with both numbers, plus OOM rows found in ``oom``."""
    data = ScatterData()
    for row in rows:
        if row.measured_memory_gib is not None and row.predicted_memory_gib is not None:
            data.memory.append(
                ScatterPoint(row.id, row.gpu, row.measured_memory_gib, row.predicted_memory_gib, row.memory_kind)
            )
        if row.measured_time_s is not None and row.predicted_time_s is not None:
            data.time.append(
                ScatterPoint(row.id, row.gpu, row.measured_time_s, row.predicted_time_s, row.time_kind or "?")
            )
        if row.oom_measured and oom and row.id in oom:
            capacity, need = oom[row.id]
            data.oom.append(OomPoint(row.id, row.gpu, capacity, need, row.verdict_correct))
    return data


@dataclass(frozen=True)
class SweepSeries:
    """One method's curves over ``seq_lens``; None where nothing fits (a gap in the line)."""

    method: str
    seq_lens: list[int]
    tokens_per_s: list[float | None]
    peak_memory_gib: list[float | None]
    closest_need_gib: list[float | None]
    closest_host_ram_only: list[bool]
    status: list[str]

    @property
    def unsupported(self) -> bool:
        """The GPU cannot run this method at any length (e.g. QLoRA without bitsandbytes)."""
        return all(status == "unsupported" for status in self.status)


def sweep_series(result: SweepResult) -> list[SweepSeries]:
    """Per-method series of a sweep (what ``sweep_png`` draws)."""
    series = []
    for method in result.methods:
        cells = result.for_method(method)
        series.append(
            SweepSeries(
                method=method,
                seq_lens=[c.seq_len for c in cells],
                tokens_per_s=[c.estimate.tokens_per_s if c.estimate else None for c in cells],
                peak_memory_gib=[c.estimate.peak_memory_gib if c.estimate else None for c in cells],
                closest_need_gib=[c.closest_need_gib for c in cells],
                closest_host_ram_only=[c.closest_short_of == ("host RAM",) for c in cells],
                status=[c.status for c in cells],
            )
        )
    return series
