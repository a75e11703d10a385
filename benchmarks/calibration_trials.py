"""Calibrate on a few rows of one stack, predict its other rows: what ``autotune calibrate`` does for a user (issue 28).

Groups: every shipped measurement set (the seed tables by source, the llm-foundry MPT rows, the core's own runs) split
by GPU, one stack on one card, keeping the groups with at least ``--k`` + 2 timed rows. For each group, ``--draws``
trials: the first ``--k`` rows (draw 1), then random draws of ``--k`` rows (seeded); the ``k`` rows are what
``autotune calibrate`` is given (``recalibrate.recalibrate``, as the command does), the group's other timed rows are
predicted before (the start) and after. ``--with-seeds`` pools the ``k`` rows with the start's own rows.

The start (``--start``):
  * ``blind`` (default): the calibration ``tools/calibrate_seeds.py`` fits (``crossval.fit_from_priors``) on every
    shipped row *outside the group's measurement set* (all its cards): what a user of a stack the project never saw
    starts from, and what the people who plan the work measure on the public rows they keep back. One fit per set
    (~7–40 s each).
  * ``shipped``: the shipped calibration, fitted with these very rows (without their stacks' factors, which never
    predict): not blind, so where it already fits a stack well three rows can only add their noise.

Draws (``--draws-kinds``): ``random`` (the first ``--k`` rows, then random draws of ``--k`` rows) and ``corner``
(``--k`` rows sharing model, method and a sequence band, :func:`seq_band`: what a user measures who tries one corner of
the setting space first; up to ``--draws`` such corners per group, seeded; a group without one prints no line) and
``suggest`` (one draw: the ``--k`` rows ``calibrate --suggest`` picks with the group's own rows as the plan space,
:func:`suggested_draw`).

Printed per group (one source: one stack on one card), draw kind and mode: tokens/s MAPE of the held-out rows before →
after (mean over draws; tokens/s error = measured time / predicted time − 1), time MAPE after, its floor
(:func:`factor_floor`: the least time MAPE of the held-out rows that any one stack factor reaches, chosen on those
rows themselves), pairs of held-out rows in the measured order, the printed band's coverage before → after (the share
of held-out rows whose |log(measured / predicted)| lies within log(1 + the estimate's ``time_uncertainty_fraction``);
after, with its 90 % interval over the draws, :func:`coverage_interval`), and in how many draws the held-out MAPE got
worse; then, per draw kind and mode, the **median over sources** (a pooled mean is dominated by the source with the
largest error) and the pooled figures beside it, with how many sources' coverage lies in issue 43's 70–90 % and how
many lie outside it beyond their interval (:func:`target_verdict`). ``benchmarks/band_draw_spread.py`` shows how far
an exactly calibrated band's coverage can read from 80 % over so few draws. A refit refused because it would fit its
own rows worse (``RefitRefused``) keeps the start calibration: counted as a refusal, its predictions unchanged.

``--sensitivity`` instead reruns the default mode (without the seeds) for each combination of the stack refit's prior
constants (:data:`SENSITIVITY`: ``stack_fit.STACK_LOG_SIGMA``, ``ROW_SIGMA_PRIOR_DOF``, ``ROW_LOG_SIGMA``) and prints,
per combination, the pooled change and the most draws any one source got worse in: how much the result rests on them.

Usage:  python benchmarks/calibration_trials.py [--k 3] [--draws 5] [--modes without,with] [--seed 0]
                                               [--start blind|shipped] [--sensitivity] [--kinds random,corner]
                                               [--cache DIR] [--rows]
        (``--rows`` also prints each held-out row: its distance to the nearest calibration row in the correction's
        kernel metric, the printed band and the log error, before and after: where the band misses)
        (``--cache DIR`` keeps the blind starts as calibration YAML files in DIR and reads them back on the next run)
        (the blind starts: ~3 min; without: seconds; with: ~1 min per trial, the pooled fit runs on ~190 rows;
        --sensitivity: ~18 × 20 s after the starts)
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import combinations, product
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from trial_groups import Group, blind_start, group_draws, groups, suggested_draw

from autotune.calibration import stack_fit
from autotune.calibration.cases import Case
from autotune.calibration.coverage import row_point
from autotune.calibration.recalibrate import RefitRefused, recalibrate
from autotune.calibration.results import CaseResult, evaluate
from autotune.calibration.time_fit import TimeRow
from autotune.costmodel.calibration import default_coefficients
from autotune.costmodel.time_correction import scaled_distance_sq
from autotune.schemas.calibration import CostCoefficients

WORSE_TOLERANCE = 0.01
"""A draw is also counted as worse "by more than a point" when its held-out MAPE rises by more than 1 point (the core's
runs vary 1–2 % step to step)."""


SENSITIVITY: dict[str, tuple[float, ...]] = {
    "STACK_LOG_SIGMA": (0.5, 1.0, 2.0),
    "ROW_SIGMA_PRIOR_DOF": (1, 3, 5),
    "ROW_LOG_SIGMA": (0.1, 0.14),
}
"""The prior constants ``--sensitivity`` varies (``stack_fit``): the other stack's σ a factor √e, e or e², the rows'
scatter prior worth 1, 3 or 5 rows, centred on 10 % (a stack the start describes) or 14 % (the median over the eight
stacks and cards)."""


@dataclass
class Tally:
    """Held-out errors of one group and mode over its draws."""

    before_tps: list[float] = field(default_factory=list)
    after_tps: list[float] = field(default_factory=list)
    after_time: list[float] = field(default_factory=list)
    floor_time: list[float] = field(default_factory=list)
    pairs_before: list[float] = field(default_factory=list)
    pairs_after: list[float] = field(default_factory=list)
    covered_before: list[float] = field(default_factory=list)
    draw_coverage: list[list[float]] = field(default_factory=list)
    """Per draw, the band-after coverage of each held-out row (1 inside, 0 outside): :func:`coverage_interval`."""
    worse_draws: int = 0
    worse_by_a_point: int = 0
    refused: int = 0
    draws: int = 0

    @property
    def covered_after(self) -> list[float]:
        """The band-after coverage of every held-out row, the draws one after another."""
        return [x for draw in self.draw_coverage for x in draw]

    def add(self, other: Tally) -> None:
        """Pool ``other``'s errors and counts into this tally."""
        for name in (
            "before_tps",
            "after_tps",
            "after_time",
            "floor_time",
            "pairs_before",
            "pairs_after",
            "covered_before",
            "draw_coverage",
        ):
            getattr(self, name).extend(getattr(other, name))
        self.worse_draws += other.worse_draws
        self.worse_by_a_point += other.worse_by_a_point
        self.refused += other.refused
        self.draws += other.draws


def tokens_error(result: CaseResult) -> float:
    """|measured time / predicted time − 1|: the tokens/s error of the prediction."""
    assert result.measured_time_s is not None and result.predicted_time_s is not None
    return abs(result.measured_time_s / result.predicted_time_s - 1)


def covered(result: CaseResult) -> float:
    """1 when the measured time lies within the prediction's printed band (``time_uncertainty_fraction``), else 0.

    Compared in log space, |log(measured / predicted)| ≤ log(1 + band), so a band covers slow and fast rows alike.
    """
    assert result.measured_time_s is not None and result.predicted_time_s is not None
    band = result.estimate.time_uncertainty_fraction
    return float(abs(math.log(result.measured_time_s / result.predicted_time_s)) <= math.log1p(band) + 1e-12)


def time_error(result: CaseResult) -> float:
    """|predicted time / measured time − 1| (``CaseResult.time_error``)."""
    assert result.time_error is not None
    return abs(result.time_error)


def pairs_in_order(results: Sequence[CaseResult]) -> float:
    """Share of pairs of rows (different measured times) whose predicted times are in the measured order."""
    pairs = [
        (a, b)
        for a, b in combinations(results, 2)
        if a.measured_time_s is not None and b.measured_time_s is not None and a.measured_time_s != b.measured_time_s
    ]
    if not pairs:
        return 1.0
    agree = sum(
        ((a.measured_time_s or 0) < (b.measured_time_s or 0)) == ((a.predicted_time_s or 0) < (b.predicted_time_s or 0))
        for a, b in pairs
    )
    return agree / len(pairs)


def factor_floor(results: Sequence[CaseResult]) -> float:
    """The least time MAPE any one stack factor f gives these rows: min over f of mean |f · predicted / measured − 1|.

    The factor is chosen on the rows themselves (an oracle), so no calibration that only scales the start's times
    (``time_scale``, all that three rows fit: ``stack_fit.ROWS_PER_EXTRA_TERM``) can do better on them. The mean is
    convex and piecewise linear in f, so its minimum lies at one of the f = measured / predicted of a row.
    """
    ratios = [(r.predicted_time_s or 0) / (r.measured_time_s or 1) for r in results]
    if not ratios:
        return 0.0
    return min(mean([abs(ratio / pivot - 1) for ratio in ratios]) for pivot in ratios)


def group_tally(
    group: Group, chosen: list[list[Case]], start: CostCoefficients, with_seeds: bool, blind: bool
) -> Tally:
    """One :func:`trial` per draw in ``chosen``: the group's tally in one mode."""
    tally = Tally()
    for rows in chosen:
        trial(group, rows, start, with_seeds, blind, tally)
    return tally


def mean(values: Sequence[float]) -> float:
    """Arithmetic mean (0 for none)."""
    return sum(values) / len(values) if values else 0.0


BOOTSTRAP_RESAMPLES = 2000
"""Resamples of :func:`coverage_interval` (a 90 % percentile interval: the 5th and 95th percentiles of 2,000)."""

TARGET_COVERAGE = (0.70, 0.90)
"""Issue 43's target for the printed 80 % band: it covers 70–90 % of a source's held-out rows."""


def coverage_interval(draw_coverage: Sequence[Sequence[float]], seed: str) -> tuple[float, float] | None:
    """90 % percentile-bootstrap interval of a source's band coverage over its draws; None for one draw.

    The draws are the unit resampled (Efron & Tibshirani, *An Introduction to the Bootstrap*, 1993, ch. 13): a draw's
    held-out rows share its three rows' fitted factor and band, so they are not independent, and the spread between
    draws is what says whether a source's coverage differs from the target or from another method's. The statistic is
    the pooled share of covered rows, as in the table. Seeded by ``seed`` (the source and kind), so reruns agree.
    """
    if len(draw_coverage) < 2:
        return None
    rng = random.Random(seed)
    shares = []
    for _ in range(BOOTSTRAP_RESAMPLES):
        picked = [draw_coverage[rng.randrange(len(draw_coverage))] for _ in draw_coverage]
        rows = [x for draw in picked for x in draw]
        shares.append(mean(rows))
    shares.sort()
    return shares[int(0.05 * BOOTSTRAP_RESAMPLES)], shares[int(0.95 * BOOTSTRAP_RESAMPLES) - 1]


def coverage_text(tally: Tally, seed: str) -> str:
    """'83 % (74–90)': the band coverage after, with :func:`coverage_interval` (just the share for one draw)."""
    interval = coverage_interval(tally.draw_coverage, seed)
    share = f"{mean(tally.covered_after) * 100:.0f}%"
    return share if interval is None else f"{share} ({interval[0] * 100:.0f}–{interval[1] * 100:.0f})"


def target_verdict(tallies: Sequence[Tally], seeds: Sequence[str]) -> str:
    """How many sources' coverage lies in :data:`TARGET_COVERAGE`, and how many lie outside it beyond their spread.

    A source is *outside beyond its spread* when its whole :func:`coverage_interval` lies outside the target (its miss
    is the band's, not the draws'); one draw gives no interval.
    """
    low, high = TARGET_COVERAGE
    inside = sum(low <= mean(t.covered_after) <= high for t in tallies)
    intervals = [coverage_interval(t.draw_coverage, s) for t, s in zip(tallies, seeds, strict=True)]
    beyond = sum(i is not None and (i[1] < low or i[0] > high) for i in intervals)
    judged = sum(i is not None for i in intervals)
    return f"{inside} of {len(tallies)} sources in {low:.0%}–{high:.0%}" + (
        f", {beyond} of {judged} outside it beyond their draws' 90 % interval" if judged else ""
    )


def trial(group: Group, rows: list[Case], start: CostCoefficients, with_seeds: bool, blind: bool, tally: Tally) -> None:
    """Calibrate on ``rows`` from ``start``, predict the group's other rows, add the errors to ``tally``.

    The seed pool of ``with_seeds``: the blind start's rows (``blind``), else every row outside the group.
    """
    ids = {c.measurement.id for c in rows}
    held = [c for c in group.timed if c.measurement.id not in ids]
    before = evaluate(held, start)
    try:
        fitted = recalibrate(
            rows,
            start,
            start_name="blind" if blind else "shipped",
            sources=[group.name],
            with_seeds=with_seeds,
            name="trial",
            seed_cases=group.start_cases(blind),
        ).coefficients
    except RefitRefused:
        tally.refused += 1
        fitted = start
    after = evaluate(held, fitted)
    errors_before = [tokens_error(r) for r in before]
    errors_after = [tokens_error(r) for r in after]
    tally.before_tps += errors_before
    tally.after_tps += errors_after
    tally.after_time += [time_error(r) for r in after]
    tally.floor_time += [factor_floor(before)] * len(before)  # weighted like the held-out rows it is a floor for
    tally.pairs_before.append(pairs_in_order(before))
    tally.pairs_after.append(pairs_in_order(after))
    tally.covered_before += [covered(r) for r in before]
    tally.draw_coverage.append([covered(r) for r in after])
    tally.worse_draws += mean(errors_after) > mean(errors_before) + 1e-9
    tally.worse_by_a_point += mean(errors_after) > mean(errors_before) + WORSE_TOLERANCE
    tally.draws += 1
    if SHOW_ROWS:
        print_rows(before, after, fitted)


SHOW_ROWS = False
"""``--rows``: :func:`trial` prints each held-out row (:func:`print_rows`)."""


def print_rows(before: Sequence[CaseResult], after: Sequence[CaseResult], fitted: CostCoefficients) -> None:
    """Print each held-out row: where it lies from the calibration's rows, its band and its error (``--rows``).

    The distance is √``time_correction.scaled_distance_sq`` to the nearest calibration row (∞ without a correction);
    the band and log(measured / predicted) are before → after; 'OUTSIDE' where the band after misses the row.
    """
    correction = fitted.local_time_correction
    for old, new in zip(before, after, strict=True):
        point = row_point(TimeRow(new.case, new.time_kind or "micro-step", new.measured_time_s or 0.0))
        anchors = correction.anchors if correction is not None else []
        distance = min((math.sqrt(scaled_distance_sq(point, a)) for a in anchors), default=math.inf)
        logs = [math.log((r.measured_time_s or 1) / (r.predicted_time_s or 1)) for r in (old, new)]
        bands = [r.estimate.time_uncertainty_fraction for r in (old, new)]
        print(
            f"    {new.case.measurement.id[:40]:40s} distance {distance:5.2f}  band ±{bands[0]:.0%} → ±{bands[1]:.0%}  "
            f"log error {logs[0]:+.3f} → {logs[1]:+.3f}  {'inside' if covered(new) else 'OUTSIDE'}"
        )


def sensitivity(
    found: list[Group],
    args: argparse.Namespace,
    blind: bool,
    shipped: CostCoefficients,
    starts: dict[str, CostCoefficients],
) -> int:
    """The default mode's pooled result for each combination of :data:`SENSITIVITY`'s constants (restored after)."""
    saved = {name: getattr(stack_fit, name) for name in SENSITIVITY}
    chosen = {g.name: group_draws(g, args) for g in found}
    try:
        for values in product(*SENSITIVITY.values()):
            for name, value in zip(SENSITIVITY, values, strict=True):
                setattr(stack_fit, name, value)
            total, worst = Tally(), 0
            for group in found:
                start = blind_start(group, starts, args.cache) if blind else shipped
                tally = group_tally(group, chosen[group.name], start, False, blind)
                total.add(tally)
                worst = max(worst, tally.worse_draws)
            setting = ", ".join(f"{n} {v:g}" for n, v in zip(SENSITIVITY, values, strict=True))
            change = (mean(total.after_tps) / mean(total.before_tps) - 1) * 100
            print(
                f"{setting}: pooled tokens/s MAPE {mean(total.before_tps) * 100:.1f}% → "
                f"{mean(total.after_tps) * 100:.1f}% ({change:+.0f}%), worse in {total.worse_draws} draws, "
                f"at most {worst} of {args.draws} for one source",
                flush=True,
            )
    finally:
        for name, value in saved.items():
            setattr(stack_fit, name, value)
    return 0


def group_line(name: str, kind: str, mode: str, rows: int, tally: Tally) -> str:
    """One source's figures in one draw kind and mode (the table's row)."""
    after = coverage_text(tally, f"{name}-{kind}-{mode}")
    return (
        f"{name:42s} {kind:7s} {mode:8s} {rows:4d} "
        f"{mean(tally.before_tps) * 100:11.1f}% → {mean(tally.after_tps) * 100:6.1f}%      "
        f"{mean(tally.after_time) * 100:8.1f}% {mean(tally.floor_time) * 100:5.1f}% "
        f"{mean(tally.pairs_before) * 100:6.0f}% → {mean(tally.pairs_after) * 100:4.0f}% "
        f"{mean(tally.covered_before) * 100:7.0f}% → {after:>14s} "
        f"{tally.worse_draws:5d}/{tally.draws:d} ({tally.worse_by_a_point:d}/{tally.draws:d}) {tally.refused:7d}"
    )


def summary_line(kind: str, mode: str, tallies: list[Tally], names: Sequence[str]) -> str:
    """The median over sources of their mean held-out MAPE before → after, and the pooled figures beside it.

    ``names``: the sources, in the order of ``tallies`` (they seed :func:`coverage_interval` as the table's rows do).
    """
    before = statistics.median(mean(t.before_tps) for t in tallies)
    after = statistics.median(mean(t.after_tps) for t in tallies)
    total = Tally()
    for tally in tallies:
        total.add(tally)
    coverage = [mean(t.covered_after) for t in tallies]
    worse_sources = sum(mean(t.after_tps) > mean(t.before_tps) + 1e-9 for t in tallies)
    return (
        f"{kind} draws, {mode}-seeds, {len(tallies)} sources: median over sources tokens/s MAPE {before * 100:.1f}% → "
        f"{after * 100:.1f}% ({(after / before - 1) * 100 if before else 0.0:+.0f}%); pooled "
        f"{mean(total.before_tps) * 100:.1f}% → {mean(total.after_tps) * 100:.1f}%; sources worse on average "
        f"{worse_sources}, most draws worse for one source {max(t.worse_draws for t in tallies)} of "
        f"{max(t.draws for t in tallies)}; band coverage after {min(coverage) * 100:.0f}–{max(coverage) * 100:.0f}% "
        f"per source (pooled {mean(total.covered_after) * 100:.0f}%, before {mean(total.covered_before) * 100:.0f}%; "
        f"{target_verdict(tallies, [f'{n}-{kind}-{mode}' for n in names])}); {total.refused} refused"
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line (module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, default=3, help="rows given to calibrate (default 3)")
    parser.add_argument("--draws", type=int, default=5, help="trials per group and draw kind (default 5)")
    parser.add_argument("--modes", default="without,with", help="'without', 'with' or both (comma-separated)")
    parser.add_argument(
        "--kinds", default="random,corner,suggest", help="draw kinds: random, corner, suggest (comma-separated)"
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed of the draws")
    parser.add_argument("--only", default="", help="only groups whose name contains this")
    parser.add_argument("--cache", type=Path, default=None, help="folder that keeps the blind starts between runs")
    parser.add_argument(
        "--start",
        choices=("blind", "shipped"),
        default="blind",
        help="blind: the seed fit without the group's set (default); shipped: the shipped calibration",
    )
    parser.add_argument(
        "--sensitivity", action="store_true", help="rerun the default mode for each combination of the prior constants"
    )
    parser.add_argument("--rows", action="store_true", help="print each held-out row's distance, band and error")
    args = parser.parse_args(argv)
    args.mode_list = [m.strip() for m in args.modes.split(",") if m.strip()]
    args.kind_list = [m.strip() for m in args.kinds.split(",") if m.strip()]
    if not set(args.mode_list) <= {"without", "with"} or not args.mode_list:
        parser.error("--modes takes 'without', 'with' or both")
    if not set(args.kind_list) <= set(DRAW_KINDS) or not args.kind_list:
        parser.error(f"--kinds takes {', '.join(DRAW_KINDS)}")
    return args


DRAW_KINDS = ("random", "corner", "suggest")
"""The draw kinds :func:`group_draws` knows."""


def main(argv: list[str] | None = None) -> int:
    """Run the trials and print the table; returns the exit code."""
    args = parse_args(argv)
    global SHOW_ROWS
    SHOW_ROWS = args.rows
    shipped = default_coefficients()
    blind = args.start == "blind"
    starts: dict[str, CostCoefficients] = {}
    found = [g for g in groups(args.k + 2) if args.only in g.name]
    print(
        f"{len(found)} groups (one stack on one card, ≥ {args.k + 2} timed rows); k = {args.k}, {args.draws} draws; "
        f"start: {'the seed fit without the group’s set (blind)' if blind else 'the shipped calibration (not blind)'}"
    )
    if args.sensitivity:
        return sensitivity(found, args, blind, shipped, starts)
    print(
        f"{'group':42s} {'draws':7s} {'mode':8s} {'rows':>4s} {'tok/s MAPE before → after':>26s} {'time MAPE':>9s} "
        f"{'floor':>6s} {'pairs before → after':>18s} {'band coverage (90 % over draws)':>32s} "
        f"{'worse (>1 pt)':>13s} {'refused':>7s}"
    )
    by_kind: dict[tuple[str, str], list[tuple[str, Tally]]] = {}
    for kind in args.kind_list:
        for group in found:
            start = blind_start(group, starts, args.cache) if blind else shipped
            if kind == "suggest":
                chosen = suggested_draw(group, args.k, start, group.start_cases(blind))
            else:
                chosen = group_draws(group, args, kind)
            if not chosen:
                continue
            for mode in args.mode_list:
                tally = group_tally(group, chosen, start, mode == "with", blind)
                by_kind.setdefault((kind, mode), []).append((group.name, tally))
                print(group_line(group.name, kind, mode, len(group.timed), tally), flush=True)
    for (kind, mode), named in by_kind.items():
        print(summary_line(kind, mode, [t for _, t in named], [n for n, _ in named]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
