"""PNG pictures for ``--plot``: memory breakdown bars, predicted-vs-measured scatter, sweep curves.

matplotlib is an optional extra (``pip install 'autotune[plot]'``) and is imported only inside the drawing
functions. Figures are drawn with the Agg canvas (no display, no pyplot global state) and written
exclusively: an existing file is never replaced. Each picture has a pure helper that computes exactly the
numbers handed to matplotlib (``memory_bars``, ``scatter_points``, ``sweep_series``), so tests can check
them without reading pixels. Memory is in GiB, times in seconds, throughput in tokens/s over all GPUs.
"""

from __future__ import annotations

import io
import math
import textwrap
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autotune.errors import AutotuneError, ConfigError, InvalidRequestError
from autotune.planner.sweep import SweepResult
from autotune.schemas.estimate import Estimate

if TYPE_CHECKING:
    from autotune.costmodel.fitting import CaseResult
    from autotune.costmodel.validation import RowReport

MISSING_MATPLOTLIB = "--plot needs matplotlib: pip install 'autotune[plot]'"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
DPI = 110
BAND = 0.20
"""Relative band drawn around y = x in the validation scatter (±20 %)."""

PART_COLOURS = {
    "weights": "#4C72B0",
    "gathered weights": "#8172B3",
    "autocast weight copies": "#64B5CD",
    "lora adapters": "#55A868",
    "gradients": "#C44E52",
    "ddp buckets": "#DA8BC3",
    "optimizer states": "#DD8452",
    "optimizer step buffers": "#CCB974",
    "activations": "#937860",
    "logits + loss": "#8C8C8C",
}
"""One colour per memory part, the same in every picture; the dict order is the stacking order."""
CONTEXT_COLOUR = "#D0D0D0"
HEADROOM_COLOUR = "#FFFFFF"
SWEEP_MEMORY_AXIS_CAPACITIES = 2.2
"""The sweep's memory axis ends at this many GPU capacities (or the highest fitting peak); needs beyond it
are drawn as arrows at the top edge with their value."""
METHOD_COLOURS = {"full": "#C44E52", "lora": "#4C72B0", "qlora": "#55A868"}
FALLBACK_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf")


def colour_for(name: str, table: Mapping[str, str] = PART_COLOURS) -> str:
    """The fixed colour of a memory part / method, or a stable fallback derived from the name."""
    return table.get(name) or FALLBACK_COLOURS[zlib.crc32(name.encode()) % len(FALLBACK_COLOURS)]


# --- pure data -------------------------------------------------------------------------------------------


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
    """Stack data for ``memory_breakdown_png``: parts in ``PART_COLOURS`` order (unknown parts after, by
    name); parts that are zero in every setting are left out.

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
    """A row measured OOM: x = GPU memory (the real need was above it), y = predicted need (peak + context +
    headroom); above y = x means the model also says it does not fit."""

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
        return sorted({p.gpu for p in [*self.memory, *self.time, *self.oom]})


def oom_needs(results: Sequence[CaseResult]) -> dict[str, tuple[float, float]]:
    """For each row measured OOM: id → (GPU memory, predicted peak + context + headroom), GiB."""
    needs = {}
    for r in results:
        if r.oom_measured:
            e = r.estimate
            needs[r.id] = (e.gpu_memory_gib, e.peak_memory_gib + e.cuda_context_gib + e.memory_headroom_gib)
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


# --- drawing ---------------------------------------------------------------------------------------------


def check_plot_path(path: Path) -> Path:
    """Refuse a target that is not a new ``.png`` in an existing directory, or a missing matplotlib; commands
    call this before any work so that nothing is half done.

    Raises:
        AutotuneError: matplotlib is not installed. InvalidRequestError: wrong suffix or the file exists.
        ConfigError: the directory does not exist.
    """
    _matplotlib_figure_classes()
    path = Path(path)
    if path.suffix.lower() != ".png":
        raise InvalidRequestError(f"--plot {path}: the picture is a PNG; give a path ending in .png")
    if path.exists():
        raise InvalidRequestError(f"--plot {path} already exists; refusing to overwrite it (choose another path)")
    if not path.parent.is_dir():
        raise ConfigError(f"--plot {path}: directory {path.parent} does not exist")
    return path


def _matplotlib_figure_classes() -> tuple[Any, Any]:
    """(Figure, FigureCanvasAgg), imported here only.

    Raises:
        AutotuneError: matplotlib is not installed (one line with the install command).
    """
    try:
        import matplotlib  # noqa: F401  (fails first when matplotlib is missing)
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as error:
        raise AutotuneError(MISSING_MATPLOTLIB) from error
    return Figure, FigureCanvasAgg


def _new_figure(width_in: float, height_in: float) -> Any:
    """A matplotlib Figure on an Agg canvas (no display, no pyplot state)."""
    figure_class, canvas_class = _matplotlib_figure_classes()
    figure = figure_class(figsize=(width_in, height_in), dpi=DPI, layout="constrained")
    canvas_class(figure)
    return figure


def _save(figure: Any, path: Path) -> Path:
    """Render to PNG bytes, then create the file exclusively (never replaces an existing file)."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI)
    try:
        with Path(path).open("xb") as handle:
            handle.write(buffer.getvalue())
    except FileExistsError:
        raise InvalidRequestError(f"--plot {path} already exists; refusing to overwrite it") from None
    except OSError as error:
        raise ConfigError(f"cannot write {path}: {error}") from None
    return Path(path)


def memory_breakdown_png(estimates: Sequence[tuple[str, Estimate]], path: Path, title: str | None = None) -> Path:
    """Stacked bar per setting of the peak-memory breakdown per GPU, with context + headroom on top and the
    GPU's memory as a horizontal line; returns the written path.

    Raises:
        AutotuneError: matplotlib missing; InvalidRequestError / ConfigError: bad target path.
    """
    check_plot_path(path)
    bars = memory_bars(estimates)
    n = len(bars.labels)
    figure = _new_figure(max(7.5, 1.7 * n + 3.2), 5.2)
    ax = figure.add_subplot()
    x = list(range(n))
    top = max([*bars.needs_gib, *bars.capacity_gib])
    bottom = [0.0] * n
    for part in bars.parts:
        values = bars.values_gib[part]
        ax.bar(x, values, 0.6, bottom=bottom, color=colour_for(part), edgecolor="white", linewidth=0.6, label=part)
        for i, value in enumerate(values):
            if value >= 0.045 * top:
                ax.text(i, bottom[i] + value / 2, f"{value:.1f}", ha="center", va="center", fontsize=8, color="white")
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    peaks = list(bottom)
    ax.bar(x, bars.context_gib, 0.6, bottom=bottom, color=CONTEXT_COLOUR, edgecolor="#888888", linewidth=0.6,
           label="CUDA context")
    bottom = [b + c for b, c in zip(bottom, bars.context_gib, strict=True)]
    ax.bar(x, bars.headroom_gib, 0.6, bottom=bottom, color=HEADROOM_COLOUR, edgecolor="#888888", hatch="///",
           linewidth=0.6, label="headroom (error band)")
    for i, (peak, need) in enumerate(zip(peaks, bars.needs_gib, strict=True)):
        ax.text(i, need + 0.012 * top, f"peak {peak:.1f}\nneeds {need:.1f}", ha="center", va="bottom", fontsize=8)
    for capacity in sorted(set(bars.capacity_gib)):
        ax.axhline(capacity, color="#B00020", linestyle="--", linewidth=1.2)
        ax.text(n - 0.5, capacity, f" GPU memory {capacity:.0f} GiB", color="#B00020", va="bottom", ha="right",
                fontsize=8)
    ax.set_xticks(x, [textwrap.fill(label, 22) for label in bars.labels], fontsize=7.5)
    ax.set_xlim(-0.6, n - 0.4)
    ax.set_ylim(0, top * 1.18)
    ax.set_ylabel("GiB per GPU")
    figure.suptitle(textwrap.fill(title or "Peak memory per GPU (allocated), with CUDA context and headroom", 60))
    handles, labels = ax.get_legend_handles_labels()
    ax.legend(handles[::-1], labels[::-1], loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    return _save(figure, path)


def validation_scatter_png(
    summary_rows: Sequence[RowReport],
    path: Path,
    oom: Mapping[str, tuple[float, float]] | None = None,
    title: str | None = None,
) -> Path:
    """Predicted vs measured: memory (GiB, linear) and time (s, log-log), y = x and a ±20 % band, points
    coloured by GPU; rows measured OOM (given by ``oom``, see ``oom_needs``) drawn as crosses at x = GPU
    memory, y = predicted need, ringed in red when the model wrongly says they fit.

    Raises:
        AutotuneError: matplotlib missing; InvalidRequestError / ConfigError: bad target path.
    """
    check_plot_path(path)
    data = scatter_points(summary_rows, oom)
    gpu_colour = {gpu: FALLBACK_COLOURS[i % len(FALLBACK_COLOURS)] for i, gpu in enumerate(data.gpus)}
    figure = _new_figure(12.5, 5.6)
    mem_ax, time_ax = figure.subplots(1, 2)
    for ax, points, log, unit in ((mem_ax, data.memory, False, "GiB"), (time_ax, data.time, True, "s")):
        values = [v for p in points for v in (p.measured, p.predicted)]
        if ax is mem_ax:
            values += [v for p in data.oom for v in (p.gpu_memory_gib, p.predicted_need_gib)]
        low, high = (min(values), max(values)) if values else (1.0, 10.0)
        low, high = (low / 1.5, high * 1.5) if log else (0.0, high * 1.1)
        line = [low + (high - low) * k / 100 for k in range(101)] if not log else _geomspace(low, high)
        ax.fill_between(line, [v * (1 - BAND) for v in line], [v * (1 + BAND) for v in line], color="#EEEEEE",
                        label=f"±{BAND * 100:.0f} %")
        ax.plot(line, line, color="#555555", linewidth=1, label="predicted = measured")
        for p in points:
            filled = p.kind not in ("unknown", "run")
            colour = gpu_colour[p.gpu]
            ax.scatter(p.measured, p.predicted, s=28, marker="o" if filled else "s", linewidths=1.2,
                       facecolors=colour if filled else "none", edgecolors=colour, zorder=3)
        if log:
            ax.set_xscale("log")
            ax.set_yscale("log")
        ax.set_xlim(low, high)
        ax.set_ylim(low, high)
        ax.set_xlabel(f"measured ({unit})")
        ax.set_ylabel(f"predicted ({unit})")
    for p in data.oom:
        mem_ax.scatter(p.gpu_memory_gib, p.predicted_need_gib, s=70, marker="X", color=gpu_colour[p.gpu],
                       edgecolors="black" if p.verdict_correct else "#B00020",
                       linewidths=0.6 if p.verdict_correct else 2.0, zorder=4)
        if not p.verdict_correct:
            mem_ax.annotate(p.id, (p.gpu_memory_gib, p.predicted_need_gib), fontsize=7, color="#B00020",
                            xytext=(-6, 8), textcoords="offset points", ha="right")
    mem_ax.set_title(
        f"Peak memory per GPU: {len(data.memory)} rows, {len(data.oom)} measured OOM", fontsize=10
    )
    time_ax.set_title(f"Time: {len(data.time)} rows (log-log)", fontsize=10)
    _scatter_legend(figure, mem_ax, gpu_colour)
    figure.suptitle(title or "Cost model: predicted vs measured")
    return _save(figure, path)


def _geomspace(low: float, high: float, count: int = 101) -> list[float]:
    ratio = math.log(high / low)
    return [low * math.exp(ratio * k / (count - 1)) for k in range(count)]


def _scatter_legend(figure: Any, ax: Any, gpu_colour: Mapping[str, str]) -> None:
    from matplotlib.lines import Line2D

    def handle(marker: str, colour: str, face: str | None = None, edge: str | None = None, width: float = 1.0) -> Any:
        return Line2D([], [], linestyle="", marker=marker, color=colour, markerfacecolor=face or colour,
                      markeredgecolor=edge or colour, markeredgewidth=width, markersize=7)

    handles, labels = ax.get_legend_handles_labels()
    for gpu, colour in gpu_colour.items():
        handles.append(handle("o", colour))
        labels.append(gpu)
    handles += [
        handle("o", "#555555"),
        handle("s", "#555555", face="none"),
        handle("X", "#999999", edge="black", width=0.6),
        handle("X", "#999999", edge="#B00020", width=2.0),
    ]
    labels += [
        "memory of known kind / micro-step time",
        "memory of unknown kind / whole-run time",
        "measured OOM: x = GPU memory, y = predicted need",
        "measured OOM but predicted to fit",
    ]
    figure.legend(handles, labels, loc="outside right upper", fontsize=8, frameon=False)


def sweep_png(result: SweepResult, path: Path, title: str | None = None) -> Path:
    """Tokens/s and peak memory per GPU vs sequence length, one line per method; where nothing fits the
    line has a gap and a cross marks it under the throughput curve, and the memory panel shows the closest
    setting's GPU memory need as a hollow marker (a square when only host RAM is short; an arrow at the top
    edge with the value when off the axis), against the GPU memory line.

    Raises:
        AutotuneError: matplotlib missing; InvalidRequestError / ConfigError: bad target path.
    """
    check_plot_path(path)
    series = sweep_series(result)
    figure = _new_figure(12.5, 5.0)
    speed_ax, mem_ax = figure.subplots(1, 2)
    fitting_peaks = [v for s in series for v in s.peak_memory_gib if v is not None]
    mem_top = max([result.gpu_memory_gib * SWEEP_MEMORY_AXIS_CAPACITIES, *fitting_peaks]) * 1.05
    for index, s in enumerate(series):
        colour = colour_for(s.method, METHOD_COLOURS)
        speed = [math.nan if v is None else v for v in s.tokens_per_s]
        peak = [math.nan if v is None else v for v in s.peak_memory_gib]
        speed_ax.plot(s.seq_lens, speed, marker="o", color=colour)
        mem_ax.plot(s.seq_lens, peak, marker="o", color=colour)
        gaps = [n for n, status in zip(s.seq_lens, s.status, strict=True) if status == "infeasible"]
        speed_ax.plot(gaps, [0.03 + 0.04 * index] * len(gaps), linestyle="", marker="x", markersize=9,
                      markeredgewidth=2, color=colour, transform=speed_ax.get_xaxis_transform(), zorder=4)
        for n, need, host_only in zip(s.seq_lens, s.closest_need_gib, s.closest_host_ram_only, strict=True):
            if need is None:
                continue
            marker = "s" if host_only else "o"
            if need > mem_top:  # off the axis: an arrow at the top edge with the number
                mem_ax.plot([n], [mem_top], marker="^", markerfacecolor="none", markeredgewidth=1.5, color=colour,
                            clip_on=False, zorder=4)
                mem_ax.annotate(f"{need:.0f} GiB", (n, mem_top), xytext=(-8, -4 - 10 * index),
                                textcoords="offset points", fontsize=7, color=colour, va="top", ha="right")
                continue
            mem_ax.plot([n], [need], marker=marker, markerfacecolor="none", markeredgewidth=1.5, color=colour)
    mem_ax.set_ylim(0, mem_top)
    mem_ax.axhline(result.gpu_memory_gib, color="#B00020", linestyle="--", linewidth=1.2)
    for ax in (speed_ax, mem_ax):
        ax.set_xscale("log", base=2)
        ax.set_xticks(list(result.seq_lens), [str(n) for n in result.seq_lens])
        ax.minorticks_off()
        ax.set_xlabel("sequence length (tokens)")
        ax.grid(True, color="#EEEEEE")
    speed_ax.set_ylim(bottom=0)
    gpus = "1 GPU" if result.world_size == 1 else f"all {result.world_size} GPUs"
    speed_ax.set_ylabel(f"tokens/s ({gpus})")
    speed_ax.set_title("Throughput of the best setting (× = nothing fits)", fontsize=10)
    mem_ax.set_ylabel("GiB per GPU")
    mem_ax.set_title("Peak memory per GPU", fontsize=10)
    _sweep_legend(figure, series, result.gpu_memory_gib)
    figure.suptitle(
        title
        or f"{result.model} on {result.world_size}× {result.gpu}, global batch {result.global_batch_size}, "
        f"objective {result.objective}"
    )
    return _save(figure, path)


def _sweep_legend(figure: Any, series: Sequence[SweepSeries], gpu_memory_gib: float) -> None:
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=colour_for(s.method, METHOD_COLOURS), marker="o") for s in series]
    labels = [s.method + (" (not supported on this GPU)" if s.unsupported else "") for s in series]
    handles += [
        Line2D([], [], color="#555555", marker="o"),
        Line2D([], [], color="#555555", marker="o", markerfacecolor="none", linestyle=""),
        Line2D([], [], color="#555555", marker="s", markerfacecolor="none", linestyle=""),
        Line2D([], [], color="#555555", marker="x", markeredgewidth=2, linestyle=""),
        Line2D([], [], color="#B00020", linestyle="--"),
    ]
    labels += [
        "best setting: peak allocated",
        "nothing fits: closest setting's GPU need\n(peak + context + headroom)",
        "same, short of host RAM only (offload)",
        "nothing fits",
        f"GPU memory {gpu_memory_gib:.0f} GiB",
    ]
    figure.legend(handles, labels, loc="outside right upper", fontsize=8, frameon=False)
