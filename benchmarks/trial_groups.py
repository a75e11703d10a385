"""The sources and draws of ``calibration_trials.py``: one stack on one card, its blind start, three kinds of draw.

Imported by ``benchmarks/calibration_trials.py`` (its module docstring describes the groups, the blind start and
the draws); kept apart so each file stays small.
"""

from __future__ import annotations

import argparse
import random
import sys
from dataclasses import dataclass
from pathlib import Path

from autotune.calibration.cases import Case, comparable_time, prepare_cases
from autotune.calibration.coverage import row_point
from autotune.calibration.crossval import fit_from_priors
from autotune.calibration.suggest import Variances, greedy_variance_reduction
from autotune.calibration.time_fit import time_rows
from autotune.costmodel.calibration import load_coefficients, save_coefficients
from autotune.profiles.measurements import list_measurement_sets
from autotune.schemas.calibration import CostCoefficients


@dataclass
class Group:
    """One stack on one card: a measurement set's timed rows on one GPU."""

    name: str
    set_name: str
    timed: list[Case]
    others: list[Case]  # every shipped row outside this group
    outside_set: list[Case]  # every shipped row outside this group's measurement set (the blind start's rows)

    def start_cases(self, blind: bool) -> list[Case]:
        """The start's own rows: outside the group's set for the blind start, else every shipped row outside it."""
        return self.outside_set if blind else self.others


def groups(min_rows: int) -> list[Group]:
    """Timed rows of each shipped set by GPU, with at least ``min_rows`` rows."""
    sets = list_measurement_sets()
    everything = [(s.name, case) for s in sets for case in prepare_cases(s.measurements)]
    found = []
    for s in sets:
        by_gpu: dict[str, list[Case]] = {}
        for name, case in everything:
            if name == s.name and comparable_time(case.measurement) is not None:
                by_gpu.setdefault(case.cluster.gpu.key, []).append(case)
        for gpu, cases in sorted(by_gpu.items()):
            if len(cases) >= min_rows:
                ids = {c.measurement.id for c in cases}
                others = [c for _, c in everything if c.measurement.id not in ids]
                outside = [c for name, c in everything if name != s.name]
                found.append(Group(f"{s.name} / {gpu}", s.name, cases, others, outside))
    return found


def blind_start(group: Group, cache: dict[str, CostCoefficients], folder: Path | None = None) -> CostCoefficients:
    """The seed fit without the group's set (``fit_from_priors``, as ``tools/calibrate_seeds.py`` fits); cached.

    ``folder``: also kept there as ``<set>.yaml`` and read back from there when present (``--cache``).
    """
    if group.set_name not in cache:
        path = None if folder is None else folder / f"{group.set_name}.yaml"
        if path is not None and path.is_file():
            cache[group.set_name] = load_coefficients(path)
            return cache[group.set_name]
        print(f"  fitting the start without {group.set_name} ({len(group.outside_set)} rows)", file=sys.stderr)
        cache[group.set_name] = fit_from_priors(group.outside_set, f"without {group.set_name}")
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            save_coefficients(cache[group.set_name], path)
    return cache[group.set_name]


def draws(cases: list[Case], k: int, count: int, rng: random.Random) -> list[list[Case]]:
    """The first ``k`` rows, then ``count`` − 1 random draws of ``k`` rows."""
    chosen = [cases[:k]]
    while len(chosen) < count:
        chosen.append(rng.sample(cases, k))
    return chosen


SEQ_BAND_EDGES = (1024, 4096)
"""Sequence bands of a corner draw: ≤ 1024, 1025–4096, > 4096 tokens (the issue's corner: seq ≤ 1024)."""


def seq_band(case: Case) -> int:
    """0, 1 or 2: the :data:`SEQ_BAND_EDGES` band of the row's sequence length."""
    return sum(case.measurement.workload.seq_len > edge for edge in SEQ_BAND_EDGES)


def corner_draws(cases: list[Case], k: int, count: int, rng: random.Random) -> list[list[Case]]:
    """Up to ``count`` draws of ``k`` rows that share model, method and :func:`seq_band` (one corner each in turn).

    Only corners that leave at least two rows of the group out (something to predict); none when no corner has ``k``.
    """
    corners: dict[tuple[str, str, int], list[Case]] = {}
    for case in cases:
        key = (case.measurement.model, case.measurement.setting.method, seq_band(case))
        corners.setdefault(key, []).append(case)
    eligible = [rows for _, rows in sorted(corners.items()) if k <= len(rows) <= len(cases) - 2]
    rng.shuffle(eligible)
    return [rng.sample(eligible[i % len(eligible)], k) for i in range(count)] if eligible else []


def suggested_draw(group: Group, k: int, start: CostCoefficients, start_cases: list[Case]) -> list[list[Case]]:
    """One draw: the ``k`` rows ``calibrate --suggest k`` picks when the plan space is the group's own rows.

    ``suggest.greedy_variance_reduction`` over the rows' setting points with the start's priors (``start_cases``: the
    start's own rows, the seed cases the trial's refit weighs its band with): the suggested settings are measured rows,
    so "the nearest measured row" to each is the row itself.
    """
    points = [row_point(row) for row in time_rows(group.timed)]
    selection = greedy_variance_reduction(points, k, Variances.of(start, time_rows(start_cases)))
    return [[group.timed[i] for i in selection.chosen]]


def group_draws(group: Group, args: argparse.Namespace, kind: str = "random") -> list[list[Case]]:
    """The group's ``--draws`` draws of ``--k`` rows of one kind (random, corner), seeded by the seed and group."""
    rng = random.Random(f"{args.seed}-{group.name}" + ("" if kind == "random" else f"-{kind}"))
    if kind == "corner":
        return corner_draws(group.timed, args.k, args.draws, rng)
    return draws(group.timed, args.k, args.draws, rng)
