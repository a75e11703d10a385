"""PNG pictures for ``--plot``: memory breakdown bars, predicted-vs-measured scatter, sweep curves.

matplotlib is an optional extra (``pip install 'autotune[plot]'``) and is imported only inside the drawing
functions. Figures are drawn with the Agg canvas (no display, no pyplot global state) and written
exclusively: an existing file is never replaced. The numbers each picture draws come from a pure helper in
``autotune.cli.plot_data`` (``memory_bars``, ``scatter_points``, ``sweep_series``). Memory is in GiB,
times in seconds, throughput in tokens/s over all GPUs.
"""

from __future__ import annotations

import io
import math
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autotune.cli.plot_data import (
    GPU_COLOURS,
    METHOD_COLOURS,
    OomPoint,
    SweepSeries,
    colour_for,
    memory_bars,
    scatter_points,
    sweep_series,
)
from autotune.errors import AutotuneError, ConfigError, InvalidRequestError
from autotune.fileio import write_atomic
from autotune.planner.sweep import SweepResult
from autotune.schemas.estimate import Estimate

if TYPE_CHECKING:
    from autotune.costmodel.validation import RowReport

MISSING_MATPLOTLIB = "--plot needs matplotlib: pip install 'autotune[plot]'"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
DPI = 110
BAND = 0.20
"""Relative band drawn around y = x in the validation scatter (±20 %)."""

CONTEXT_COLOUR = "#D0D0D0"
HEADROOM_COLOUR = "#FFFFFF"
SWEEP_AXIS_LIMIT = 2.2
"""The sweep's memory axis shows needs up to this many times the larger of the GPU memory and the highest
fitting peak; larger needs are drawn as arrows at the top edge with their value."""

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
    """Render to PNG bytes, then create the file atomically and exclusively (never replaces an existing file)."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI)
    try:
        return write_atomic(path, buffer.getvalue(), what="plot")
    except InvalidRequestError:
        raise InvalidRequestError(f"--plot {path} already exists; refusing to overwrite it") from None


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
    ax.bar(
        x,
        bars.context_gib,
        0.6,
        bottom=bottom,
        color=CONTEXT_COLOUR,
        edgecolor="#888888",
        linewidth=0.6,
        label="CUDA context",
    )
    bottom = [b + c for b, c in zip(bottom, bars.context_gib, strict=True)]
    ax.bar(
        x,
        bars.headroom_gib,
        0.6,
        bottom=bottom,
        color=HEADROOM_COLOUR,
        edgecolor="#888888",
        hatch="///",
        linewidth=0.6,
        label="headroom (error band)",
    )
    for i, (peak, need) in enumerate(zip(peaks, bars.needs_gib, strict=True)):
        label = f"peak {peak:.1f}\nneeds {need:.1f}"
        box = {"facecolor": "white", "edgecolor": "none", "pad": 1.0, "alpha": 0.9}  # readable across the line
        ax.text(i, need + 0.012 * top, label, ha="center", va="bottom", fontsize=8, bbox=box, zorder=5)
    for capacity in sorted(set(bars.capacity_gib)):
        ax.axhline(capacity, color="#B00020", linestyle="--", linewidth=1.2)
        ax.text(
            n - 0.5, capacity, f" GPU memory {capacity:.0f} GiB", color="#B00020", va="bottom", ha="right", fontsize=8
        )
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
    memory, y = predicted need (arrows on the top edge when above the axis), ringed in red and labelled when
    the model wrongly says they fit.

    Raises:
        AutotuneError: matplotlib missing; InvalidRequestError / ConfigError: bad target path.
    """
    check_plot_path(path)
    data = scatter_points(summary_rows, oom)
    gpu_colour = {gpu: GPU_COLOURS[i % len(GPU_COLOURS)] for i, gpu in enumerate(data.gpus)}
    figure = _new_figure(12.5, 5.6)
    mem_ax, time_ax = figure.subplots(1, 2)
    for ax, points, log, unit in ((mem_ax, data.memory, False, "GiB"), (time_ax, data.time, True, "s")):
        values = [v for p in points for v in (p.measured, p.predicted)]
        if ax is mem_ax:  # OOM needs far above every GPU are drawn at the top edge instead of widening the axis
            values += [p.gpu_memory_gib for p in data.oom]
        low, high = (min(values), max(values)) if values else (1.0, 10.0)
        low, high = (low / 1.5, high * 1.5) if log else (0.0, high * 1.15)
        line = _geomspace(low, high) if log else [low + (high - low) * k / 100 for k in range(101)]
        ax.fill_between(
            line,
            [v * (1 - BAND) for v in line],
            [v * (1 + BAND) for v in line],
            color="#EEEEEE",
            label=f"±{BAND * 100:.0f} %",
        )
        ax.plot(line, line, color="#555555", linewidth=1, label="predicted = measured")
        for p in points:
            filled = p.kind not in ("unknown", "run")
            colour = gpu_colour[p.gpu]
            ax.scatter(
                p.measured,
                p.predicted,
                s=28,
                marker="o" if filled else "s",
                linewidths=1.2,
                facecolors=colour if filled else "none",
                edgecolors=colour,
                zorder=3,
            )
        if log:
            ax.set_xscale("log")
            ax.set_yscale("log")
        ax.set_xlim(low, high)
        ax.set_ylim(low, high)
        ax.set_xlabel(f"measured ({unit})")
        ax.set_ylabel(f"predicted ({unit})")
    _draw_oom_points(mem_ax, data.oom, gpu_colour, top=mem_ax.get_ylim()[1])
    mem_ax.set_title(f"Peak memory per GPU: {len(data.memory)} rows, {len(data.oom)} measured OOM", fontsize=10)
    time_ax.set_title(f"Time: {len(data.time)} rows (log-log)", fontsize=10)
    _scatter_legend(figure, mem_ax, gpu_colour)
    figure.suptitle(title or "Cost model: predicted vs measured")
    return _save(figure, path)


def _draw_oom_points(ax: Any, points: Sequence[OomPoint], gpu_colour: Mapping[str, str], top: float) -> None:
    """Crosses at (GPU memory, predicted need); needs above ``top`` as arrows on the top edge with the value;
    a red ring and the row id where the model wrongly says the row fits."""
    above: dict[float, int] = {}
    for p in points:
        colour = gpu_colour[p.gpu]
        y = p.predicted_need_gib
        if y > top:
            stacked = above.get(p.gpu_memory_gib, 0)
            above[p.gpu_memory_gib] = stacked + 1
            ax.plot(
                [p.gpu_memory_gib],
                [top],
                marker="^",
                markersize=8,
                color=colour,
                markeredgecolor="black",
                markeredgewidth=0.6,
                clip_on=False,
                zorder=4,
            )
            ax.annotate(
                f"{y:.0f}",
                (p.gpu_memory_gib, top),
                xytext=(7, -4 - 9 * stacked),
                textcoords="offset points",
                fontsize=7,
                color=colour,
                va="top",
            )
            continue
        ax.scatter(p.gpu_memory_gib, y, s=70, marker="X", color=colour, edgecolors="black", linewidths=0.6, zorder=4)
        if not p.verdict_correct:
            ax.scatter(
                p.gpu_memory_gib,
                y,
                s=260,
                marker="o",
                facecolors="none",
                edgecolors="#B00020",
                linewidths=1.8,
                zorder=5,
            )
            ax.annotate(
                p.id,
                (p.gpu_memory_gib, y),
                xytext=(0, -13),
                textcoords="offset points",
                fontsize=7,
                color="#B00020",
                ha="center",
                va="top",
            )


def _geomspace(low: float, high: float, count: int = 101) -> list[float]:
    ratio = math.log(high / low)
    return [low * math.exp(ratio * k / (count - 1)) for k in range(count)]


def _scatter_legend(figure: Any, ax: Any, gpu_colour: Mapping[str, str]) -> None:
    from matplotlib.lines import Line2D

    def handle(marker: str, colour: str, face: str | None = None, edge: str | None = None, width: float = 1.0) -> Any:
        return Line2D(
            [],
            [],
            linestyle="",
            marker=marker,
            color=colour,
            markerfacecolor=face or colour,
            markeredgecolor=edge or colour,
            markeredgewidth=width,
            markersize=7,
        )

    handles, labels = ax.get_legend_handles_labels()
    for gpu, colour in gpu_colour.items():
        handles.append(handle("o", colour))
        labels.append(gpu)
    handles += [
        handle("o", "#555555"),
        handle("s", "#555555", face="none"),
        handle("X", "#999999", edge="black", width=0.6),
        handle("^", "#999999", edge="black", width=0.6),
        handle("o", "#B00020", face="none", width=1.8),
    ]
    labels += [
        "memory of known kind / micro-step time",
        "memory of unknown kind / whole-run time",
        "measured OOM: x = GPU memory, y = predicted need\n(peak + context + headroom)",
        "the same, need off the axis (value in GiB)",
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
    shown = [result.gpu_memory_gib, *(v for s in series for v in s.peak_memory_gib if v is not None)]
    shown += [v for s in series for v in s.closest_need_gib if v is not None and v <= max(shown) * SWEEP_AXIS_LIMIT]
    mem_top = max(shown) * 1.18  # the margin above the highest point holds the labels of off-axis needs
    arrows_at: dict[int, int] = {}  # labels of off-axis needs stack under their arrow
    for index, s in enumerate(series):
        colour = colour_for(s.method, METHOD_COLOURS)
        speed = [math.nan if v is None else v for v in s.tokens_per_s]
        peak = [math.nan if v is None else v for v in s.peak_memory_gib]
        speed_ax.plot(s.seq_lens, speed, marker="o", color=colour)
        mem_ax.plot(s.seq_lens, peak, marker="o", color=colour)
        gaps = [n for n, status in zip(s.seq_lens, s.status, strict=True) if status == "infeasible"]
        speed_ax.plot(
            gaps,
            [0.03 + 0.04 * index] * len(gaps),
            linestyle="",
            marker="x",
            markersize=9,
            markeredgewidth=2,
            color=colour,
            transform=speed_ax.get_xaxis_transform(),
            zorder=4,
        )
        for n, need, host_only in zip(s.seq_lens, s.closest_need_gib, s.closest_host_ram_only, strict=True):
            if need is None:
                continue
            marker = "s" if host_only else "o"
            if need > mem_top:  # off the axis: an arrow at the top edge with the number
                mem_ax.plot(
                    [n],
                    [mem_top],
                    marker="^",
                    markerfacecolor="none",
                    markeredgewidth=1.5,
                    color=colour,
                    clip_on=False,
                    zorder=4,
                )
                stacked = arrows_at.get(n, 0)
                arrows_at[n] = stacked + 1
                mem_ax.annotate(
                    f"{need:.0f} GiB",
                    (n, mem_top),
                    xytext=(0, -9 - 9 * stacked),
                    textcoords="offset points",
                    fontsize=7,
                    color=colour,
                    va="top",
                    ha="center",
                )
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
