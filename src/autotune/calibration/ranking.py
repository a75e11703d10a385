"""Does the time model rank settings the way the GPUs ran them? Spearman ρ within sweeps, and MAPE, per source.

A *sweep* (for validation) is every row of one source table on the same model, GPU and GPU count that has a
comparable time (``CaseResult.measured_time_s``), when there are at least ``MIN_SWEEP_ROWS`` of them: what varies
inside is what a user chooses (micro batch, sequence length, checkpointing, method, sharding, offload). The ranked
quantity is throughput — tokens the row processes per second of its measured (or predicted) time — so rows of
different sequence lengths and global batches compare. ρ is Spearman's rank correlation (Pearson correlation of
the ranks, ties given their average rank; Spearman 1904), between measured and predicted throughput.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from autotune.calibration.results import CaseResult
from autotune.schemas.calibration import source_table

MIN_SWEEP_ROWS = 3
"""Fewest rows a validation sweep needs (with two, ρ is ±1 by construction)."""

GOOD_RHO = 0.9
"""A sweep ranked well: ρ at least this (counted per source, ``SourceRanking.good_sweeps``)."""


def ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks, ties sharing their average rank."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    result = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for position in range(start, end + 1):
            result[order[position]] = (start + end) / 2 + 1
        start = end + 1
    return result


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's ρ of two equally long sequences; None when undefined (fewer than 2 values or no variation).

    Raises:
        ValueError: the sequences differ in length.
    """
    if len(x) != len(y):
        raise ValueError(f"spearman: {len(x)} values vs {len(y)}")
    if len(x) < 2:
        return None
    rx, ry = ranks(x), ranks(y)
    mx, my = statistics.fmean(rx), statistics.fmean(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    sxx = sum((a - mx) ** 2 for a in rx)
    syy = sum((b - my) ** 2 for b in ry)
    if sxx == 0 or syy == 0:
        return None
    return sxy / math.sqrt(sxx * syy)


def _tokens(result: CaseResult) -> float:
    """Tokens the row's measured time covers (micro-step, optimizer step, or the whole stated run)."""
    m = result.case.measurement
    per_sequence = m.workload.tokens_per_sequence
    if result.time_kind == "micro-step":
        return m.setting.micro_batch_size * per_sequence
    if result.time_kind == "step":
        return m.setting.sequences_per_step(result.case.cluster.world_size) * per_sequence
    return (m.workload.total_samples or 0.0) * per_sequence


@dataclass(frozen=True)
class SweepRank:
    """One validation sweep: its label, rows, Spearman ρ of throughput (None if undefined) and time MAPE."""

    source: str
    label: str
    rows: int
    rho: float | None
    mape: float


def sweep_ranks(results: Sequence[CaseResult]) -> list[SweepRank]:
    """Spearman ρ of measured vs predicted throughput in every validation sweep of ``results``."""
    groups: dict[tuple[str, str, str, int], list[CaseResult]] = {}
    for r in results:
        if r.measured_time_s is None or r.predicted_time_s is None:
            continue
        m = r.case.measurement
        key = (source_table(m.source), m.model, m.gpu, r.case.cluster.world_size)
        groups.setdefault(key, []).append(r)
    sweeps = []
    for (source, model, gpu, gpus), members in sorted(groups.items()):
        if len(members) < MIN_SWEEP_ROWS:
            continue
        measured = [_tokens(r) / (r.measured_time_s or 1.0) for r in members]
        predicted = [_tokens(r) / (r.predicted_time_s or 1.0) for r in members]
        mape = statistics.fmean(abs(r.time_error or 0.0) for r in members)
        sweeps.append(SweepRank(source, f"{model} on {gpus}× {gpu}", len(members), spearman(measured, predicted), mape))
    return sweeps


@dataclass(frozen=True)
class SourceRanking:
    """Per source table: time MAPE over its rows, and the within-sweep ρ of its sweeps."""

    source: str
    time_rows: int
    time_mape: float | None
    sweeps: tuple[SweepRank, ...]

    @property
    def rhos(self) -> list[float]:
        """The defined ρ values of the sweeps."""
        return [s.rho for s in self.sweeps if s.rho is not None]

    @property
    def good_sweeps(self) -> int:
        """Sweeps whose ρ is at least ``GOOD_RHO``."""
        return sum(r >= GOOD_RHO for r in self.rhos)

    def as_dict(self) -> dict[str, object]:
        """JSON-ready summary."""
        rhos = self.rhos
        return {
            "source": self.source,
            "time_rows": self.time_rows,
            "time_mape": self.time_mape,
            "sweeps": len(self.sweeps),
            "rho_median": statistics.median(rhos) if rhos else None,
            "rho_min": min(rhos) if rhos else None,
            "sweeps_rho_at_least_0.9": self.good_sweeps,
            "per_sweep": [{"label": s.label, "rows": s.rows, "rho": s.rho, "mape": s.mape} for s in self.sweeps],
        }


def by_source(results: Sequence[CaseResult]) -> list[SourceRanking]:
    """``SourceRanking`` of every source table with time rows."""
    sweeps = sweep_ranks(results)
    timed: dict[str, list[CaseResult]] = {}
    for r in results:
        if r.time_error is not None:
            timed.setdefault(source_table(r.case.measurement.source), []).append(r)
    out = []
    for source, members in sorted(timed.items()):
        mape = statistics.fmean(abs(r.time_error or 0.0) for r in members)
        out.append(SourceRanking(source, len(members), mape, tuple(s for s in sweeps if s.source == source)))
    return out
