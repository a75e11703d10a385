"""PNG pictures for ``--plot``: the figure canvas and file rules every picture shares, and the memory breakdown bars.

The other pictures live beside it: :mod:`autotune.cli.plot_validation` (predicted-vs-measured scatter of
``validate --plot``) and :mod:`autotune.cli.plot_sweep` (sweep curves of ``sweep --plot``).

matplotlib is an optional extra (``pip install 'autotune[plot]'``) and is imported only inside the drawing
functions. Figures are drawn with the Agg canvas (no display, no pyplot global state) and written
exclusively: an existing file is never replaced. The numbers each picture draws come from a pure helper in
``autotune.cli.plot_data`` (``memory_bars``, ``scatter_points``, ``sweep_series``). Memory is in GiB,
times in seconds, throughput in tokens/s over all GPUs.
"""

from __future__ import annotations

import io
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from autotune.cli.plot_data import colour_for, memory_bars
from autotune.errors import AutotuneError, ConfigError, InvalidRequestError
from autotune.fileio import write_atomic
from autotune.schemas.estimate import Estimate

MISSING_MATPLOTLIB = "--plot needs matplotlib: pip install 'autotune[plot]'"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
DPI = 110

CONTEXT_COLOUR = "#D0D0D0"
HEADROOM_COLOUR = "#FFFFFF"

# --- drawing ---------------------------------------------------------------------------------------------


def check_plot_path(path: Path) -> Path:
    """Refuse a target that is not a new ``.png`` in an existing directory, or a missing matplotlib.

    Commands call this before any work so that nothing is half done.

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


def new_figure(width_in: float, height_in: float) -> Any:
    """A matplotlib Figure on an Agg canvas (no display, no pyplot state)."""
    figure_class, canvas_class = _matplotlib_figure_classes()
    figure = figure_class(figsize=(width_in, height_in), dpi=DPI, layout="constrained")
    canvas_class(figure)
    return figure


def save_figure(figure: Any, path: Path) -> Path:
    """Render to PNG bytes, then create the file atomically and exclusively (never replaces an existing file)."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI)
    try:
        return write_atomic(path, buffer.getvalue(), what="plot")
    except InvalidRequestError:
        raise InvalidRequestError(f"--plot {path} already exists; refusing to overwrite it") from None


def memory_breakdown_png(estimates: Sequence[tuple[str, Estimate]], path: Path, title: str | None = None) -> Path:
    """Stacked bar per setting of the peak-memory breakdown per GPU; returns the written path.

    Context + headroom are on top, and the GPU's memory is a horizontal line.

    Raises:
        AutotuneError: matplotlib missing; InvalidRequestError / ConfigError: bad target path.
    """
    check_plot_path(path)
    bars = memory_bars(estimates)
    n = len(bars.labels)
    figure = new_figure(max(7.5, 1.7 * n + 3.2), 5.2)
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
    return save_figure(figure, path)
