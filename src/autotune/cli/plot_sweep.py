"""``sweep --plot``: tokens/s and peak memory per GPU against sequence length, one line per method.

Numbers from :func:`autotune.cli.plot_data.sweep_series`; canvas and file rules from :mod:`autotune.cli.plots`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from autotune.cli.plot_data import METHOD_COLOURS, SweepSeries, colour_for, sweep_series
from autotune.cli.plots import check_plot_path, new_figure, save_figure
from autotune.planner.sweep import SweepResult

SWEEP_AXIS_LIMIT = 2.2
"""The sweep's memory axis shows needs up to this many times the larger of the GPU memory and the highest
fitting peak; larger needs are drawn as arrows at the top edge with their value."""


def sweep_png(result: SweepResult, path: Path, title: str | None = None) -> Path:
    """Tokens/s and peak memory per GPU vs sequence length, one line per method.

    Where nothing fits, the line has a gap and a cross marks it under the throughput curve, and the memory panel shows
    the closest setting's GPU memory need as a hollow marker (a square when only host RAM is short; an arrow at the top
    edge with the value when off the axis), against the GPU memory line.

    Raises:
        AutotuneError: matplotlib missing; InvalidRequestError / ConfigError: bad target path.
    """
    check_plot_path(path)
    series = sweep_series(result)
    figure = new_figure(12.5, 5.0)
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
    return save_figure(figure, path)


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
