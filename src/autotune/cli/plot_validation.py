"""``validate --plot``: predicted vs measured, one panel for memory and one for time.

The panels show the ±20 % band and the measured out-of-memory rows (their predicted need against the GPU's memory).
Numbers from :func:`autotune.cli.plot_data.scatter_points`; canvas and file rules from :mod:`autotune.cli.plots`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autotune.cli.plot_data import GPU_COLOURS, OomPoint, scatter_points
from autotune.cli.plots import check_plot_path, new_figure, save_figure

if TYPE_CHECKING:
    from autotune.calibration.validation import RowReport

BAND = 0.20
"""Relative band drawn around y = x in the validation scatter (±20 %)."""


def validation_scatter_png(
    summary_rows: Sequence[RowReport],
    path: Path,
    oom: Mapping[str, tuple[float, float]] | None = None,
    title: str | None = None,
) -> Path:
    """Predicted vs measured: memory (GiB, linear) and time (s, log-log), y = x, a ±20 % band, points coloured by GPU.

    Rows measured OOM (given by ``oom``, see ``oom_needs``) are drawn as crosses at x = GPU memory, y = predicted need
    (arrows on the top edge when above the axis), ringed in red and labelled when the model wrongly says they fit.

    Raises:
        AutotuneError: matplotlib missing; InvalidRequestError / ConfigError: bad target path.
    """
    check_plot_path(path)
    data = scatter_points(summary_rows, oom)
    gpu_colour = {gpu: GPU_COLOURS[i % len(GPU_COLOURS)] for i, gpu in enumerate(data.gpus)}
    figure = new_figure(12.5, 5.6)
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
    return save_figure(figure, path)


def _draw_oom_points(ax: Any, points: Sequence[OomPoint], gpu_colour: Mapping[str, str], top: float) -> None:
    """Crosses at (GPU memory, predicted need); needs above ``top`` as arrows on the top edge with the value.

    A red ring and the row id mark where the model wrongly says the row fits.
    """
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
