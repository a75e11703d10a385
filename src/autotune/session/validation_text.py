"""Plain text of the calibration layer's figures (the package returns data; the CLI and the benchmarks print this).

The error summary of ``validate`` / ``calibrate`` and the per-source ranking lines of ``validate --cv``.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from autotune.calibration.ranking import GOOD_RHO, MIN_SWEEP_ROWS, SourceRanking
from autotune.calibration.validation import ErrorSummary, RowReport


def percent(value: float | None) -> str:
    """A fraction as a percentage with one decimal ('12.3%'), or a dash."""
    return "—" if value is None else f"{value * 100:.1f}%"


def worst_text(rows: Sequence[RowReport], quantity: str) -> str:
    """'id +12%, id -8%' for rows' 'memory' or 'time' errors."""
    return ", ".join(f"{r.id} {getattr(r, quantity + '_error') * 100:+.0f}%" for r in rows)


def summary_text(summary: ErrorSummary, worst: int = 5) -> str:
    """A short plain-text summary for the terminal: MAPEs, verdicts, per group, the ``worst`` rows."""
    lines = [
        f"memory MAPE (known kind): {percent(summary.memory_mape_known_kind)}   "
        f"(unknown kind): {percent(summary.memory_mape_unknown_kind)}   over {summary.memory_rows} rows",
        f"time MAPE: {percent(summary.time_mape)} over {summary.time_rows} rows",
        f"OOM / fits verdicts correct: {summary.verdicts_correct}/{summary.verdicts_total}",
    ]
    for group, values in sorted(summary.by_group.items()):
        lines.append(
            f"  {group:28s} memory {percent(values['memory_mape'])} ({values['memory_rows']} rows), "
            f"time {percent(values['time_mape'])} ({values['time_rows']} rows)"
        )
    for quantity in ("memory", "time"):
        rows = summary.worst(worst, quantity)
        if rows:
            lines.append(f"worst {quantity}: {worst_text(rows, quantity)}")
    return "\n".join(lines)


def ranking_text(label: str, rankings: Sequence[SourceRanking]) -> list[str]:
    """Lines for a terminal: per source, time MAPE and the within-sweep ρ (median, min, sweeps with ρ ≥ 0.9)."""
    lines = [f"{label}: time MAPE and within-sweep Spearman ρ of throughput, per source"]
    for s in rankings:
        rhos = s.rhos
        rho_text = (
            f"ρ median {statistics.median(rhos):+.2f}, min {min(rhos):+.2f}, {s.good_sweeps}/{len(rhos)} "
            f"sweeps ≥ {GOOD_RHO}"
            if rhos
            else f"no sweep of ≥ {MIN_SWEEP_ROWS} timed rows"
        )
        mape = "—" if s.time_mape is None else f"{s.time_mape:.1%}"
        lines.append(f"  {s.source}: {s.time_rows} timed rows, MAPE {mape}; {len(s.sweeps)} sweeps, {rho_text}")
    return lines
