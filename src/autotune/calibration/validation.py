"""Error summaries of predictions against measurements (what ``autotune validate`` reports).

MAPE = mean of |predicted / measured − 1| over rows that have the quantity (Hyndman & Koehler 2006's
definition); memory rows whose kind is ``unknown`` are reported separately from those of known kind.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from autotune.calibration.results import CaseResult
from autotune.schemas.calibration import source_table


@dataclass(frozen=True)
class RowReport:
    """One row of the validation table."""

    id: str
    source: str
    gpu: str
    method: str
    sharding: str
    memory_kind: str
    measured_memory_gib: float | None
    predicted_memory_gib: float | None
    memory_error: float | None
    measured_time_s: float | None
    predicted_time_s: float | None
    time_kind: str | None
    time_error: float | None
    oom_measured: bool
    predicted_fits: bool
    verdict_correct: bool

    def as_dict(self) -> dict[str, object]:
        """JSON-ready dict."""
        return asdict(self)


@dataclass(frozen=True)
class ErrorSummary:
    """MAPE and counts over a set of rows, overall and by group."""

    rows: list[RowReport]
    memory_mape_known_kind: float | None
    memory_mape_unknown_kind: float | None
    time_mape: float | None
    memory_rows: int
    time_rows: int
    verdicts_correct: int
    verdicts_total: int
    by_group: dict[str, dict[str, float | int | None]]

    def as_dict(self) -> dict[str, object]:
        """JSON-ready dict without the rows."""
        data = asdict(self)
        data.pop("rows")
        return data

    def worst(self, count: int, quantity: str) -> list[RowReport]:
        """The ``count`` rows with the largest |error| for 'memory' or 'time' (:func:`largest_errors`)."""
        return largest_errors(self.rows, count, quantity)


def largest_errors(rows: Sequence[RowReport], count: int, quantity: str) -> list[RowReport]:
    """The ``count`` rows with the largest |error| of 'memory' or 'time', largest first.

    Memory rows whose kind is ``unknown`` are left out (their figures are neither fitted nor comparable: the one
    rule for every worst-rows list, in-sample and held out, text and JSON); time rows are not filtered.
    """
    attribute = f"{quantity}_error"
    if quantity == "memory":
        rows = [r for r in rows if r.memory_kind != "unknown"]
    with_error = [r for r in rows if getattr(r, attribute) is not None]
    return sorted(with_error, key=lambda r: -abs(getattr(r, attribute)))[:count]


def _mape(values: Sequence[float | None]) -> float | None:
    present = [abs(v) for v in values if v is not None]
    return statistics.fmean(present) if present else None


def row_report(result: CaseResult) -> RowReport:
    """The table row for one result."""
    m = result.case.measurement
    return RowReport(
        id=m.id,
        source=m.source,
        gpu=m.gpu,
        method=m.setting.method,
        sharding=m.setting.sharding,
        memory_kind=m.memory_kind,
        measured_memory_gib=result.measured_memory_gib,
        predicted_memory_gib=result.predicted_memory_gib,
        memory_error=result.memory_error,
        measured_time_s=result.measured_time_s,
        predicted_time_s=result.predicted_time_s,
        time_kind=result.time_kind,
        time_error=result.time_error,
        oom_measured=result.oom_measured,
        predicted_fits=result.estimate.fits,
        verdict_correct=result.oom_correct,
    )


def summarize(results: Sequence[CaseResult]) -> ErrorSummary:
    """Summarize results: MAPE overall, by GPU, by method and by source, and verdict accuracy.

    One source is one training stack: the project's own core, ``autotune-core-h100``, reports apart from other stacks'
    tables.
    """
    rows = [row_report(r) for r in results]
    groups: dict[str, list[RowReport]] = {}
    for row in rows:
        groups.setdefault(f"source {source_table(row.source)}", []).append(row)
        groups.setdefault(f"gpu {row.gpu}", []).append(row)
        groups.setdefault(f"method {row.method}", []).append(row)
    by_group: dict[str, dict[str, float | int | None]] = {}
    for name, members in groups.items():
        by_group[name] = {
            "memory_mape": _mape([r.memory_error for r in members if r.memory_kind != "unknown"]),
            "memory_rows": sum(r.memory_error is not None and r.memory_kind != "unknown" for r in members),
            "time_mape": _mape([r.time_error for r in members]),
            "time_rows": sum(r.time_error is not None for r in members),
        }
    return ErrorSummary(
        rows=rows,
        memory_mape_known_kind=_mape([r.memory_error for r in rows if r.memory_kind != "unknown"]),
        memory_mape_unknown_kind=_mape([r.memory_error for r in rows if r.memory_kind == "unknown"]),
        time_mape=_mape([r.time_error for r in rows]),
        memory_rows=sum(r.memory_error is not None for r in rows),
        time_rows=sum(r.time_error is not None for r in rows),
        verdicts_correct=sum(r.verdict_correct for r in rows),
        verdicts_total=len(rows),
        by_group=by_group,
    )
