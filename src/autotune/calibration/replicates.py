"""Rows of one setting are replicates: one point of the refit, of the local correction and of the held-out errors.

A calibration CSV of 100,000 rows holds a few settings measured many times (issue 41). Under the model of
``coverage`` — r = g + h(x) + ε, the noise ε ~ N(0, n²) independent from row to row — the c rows measured at one
setting x share g + h(x), so their likelihood factorises into the mean of their log ratios, r̄ ~ N(g + h(x), n² / c),
times a term of their scatter about it alone (the mean is sufficient for a normal mean of known variance: Gelman et al.,
*Bayesian Data Analysis* 3rd ed. §2.5; for a Gaussian process, repeated inputs are one input with the noise divided by
the count, Rasmussen & Williams, *GPML* 2006, eq. 2.20 with a diagonal noise matrix). Every Gaussian computation of the
refit therefore runs over G settings instead of N rows, with the same result:

* the stack fit's loss Σ_rows (log(predicted / mᵢ) / σ)² equals Σ_settings c (log(predicted / m̃) / σ)² plus a constant,
  m̃ the geometric mean of the setting's times (:attr:`Replicates.row`);
* the generalized-least-squares mean and the local correction's posterior: one anchor per setting, noise n² / c.

A setting measured once is its own row, unchanged, so a file of distinct settings computes exactly what it did row by
row. Rows are the same setting when they share the model, cluster, setting and workload objects' values and the kind
of time measured (the CSV reader shares the objects of a repeated setting, so most keys are found by identity).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from autotune.calibration.time_fit import TimeRow, predicted_time_s
from autotune.schemas.calibration import CostCoefficients

MAX_FIT_SETTINGS = 64
"""Most settings the stack fit and the local correction run on (a bounded debt: each setting is a prediction per fit
step, and the correction's anchors are read on every prediction of a plan). Beyond it the settings with the most rows
are fitted and the others held out: their rows are predicted, never fitted, so they measure the held-out error
(:func:`fitted_settings`). A CSV of a grid of 64 settings (4 sequence lengths × 4 micro batches × 2 methods × 2 models)
is fitted whole."""


@dataclass(frozen=True)
class Replicates:
    """The rows measured at one setting.

    Attributes:
        row: the setting's row — its first row's case and time kind, with ``measured_s`` the geometric mean of the
            members' times (the row itself when it is alone).
        members: the rows, in input order.
    """

    row: TimeRow
    members: tuple[TimeRow, ...]

    @property
    def count(self) -> int:
        """How many rows measured this setting."""
        return len(self.members)


def _value_key(row: TimeRow) -> Hashable:
    case = row.case
    return (row.kind, case.model, case.cluster, case.measurement.setting, case.measurement.workload)


def replicate_groups(rows: Sequence[TimeRow]) -> list[Replicates]:
    """The rows grouped by setting (module docstring), in the order each setting first appears."""
    by_identity: dict[tuple[int, ...], Hashable] = {}
    members: dict[Hashable, list[TimeRow]] = {}
    for row in rows:
        case = row.case
        identity = (id(case.model), id(case.cluster), id(case.measurement.setting), id(case.measurement.workload))
        key = by_identity.get(identity)
        if key is None:
            key = by_identity[identity] = _value_key(row)
        members.setdefault(key, []).append(row)
    groups = []
    for rows_of_setting in members.values():
        first = rows_of_setting[0]
        if len(rows_of_setting) == 1:
            groups.append(Replicates(first, (first,)))
            continue
        centre = sum(math.log(r.measured_s) for r in rows_of_setting) / len(rows_of_setting)
        groups.append(Replicates(TimeRow(first.case, first.kind, math.exp(centre)), tuple(rows_of_setting)))
    return groups


def fitted_settings(groups: Sequence[Replicates]) -> list[Replicates]:
    """The settings the fit runs on: all of them up to :data:`MAX_FIT_SETTINGS`, else that many with the most rows.

    Among settings with as many rows, every ⌈G / MAX⌉-th in input order first (a systematic sample through the file,
    not its first corner: a sweep written in order would otherwise fit its shortest sequences only). Kept in input
    order.
    """
    if len(groups) <= MAX_FIT_SETTINGS:
        return list(groups)
    stride = math.ceil(len(groups) / MAX_FIT_SETTINGS)
    ranked = sorted(range(len(groups)), key=lambda i: (-groups[i].count, i % stride, i))[:MAX_FIT_SETTINGS]
    return [groups[i] for i in sorted(ranked)]


def member_rows(groups: Sequence[Replicates]) -> list[TimeRow]:
    """Every row of ``groups``, setting by setting."""
    return [row for group in groups for row in group.members]


def row_log_ratios(groups: Sequence[Replicates], coefficients: CostCoefficients) -> list[float]:
    """log(measured / predicted) of every member row, setting by setting (one prediction per setting)."""
    ratios = []
    for group in groups:
        predicted = predicted_time_s(group.row, coefficients)
        if group.count == 1:
            ratios.append(math.log(group.row.measured_s / predicted))
        else:
            ratios += [math.log(r.measured_s / predicted) for r in group.members]
    return ratios
