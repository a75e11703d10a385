"""Plan quality on the seed sweeps: how far the planner's choice is from the fastest measured setting that ran.

The logic (sweeps, the planner's choice, the judgement) is :mod:`autotune.calibration.plan_quality`; this script
chooses the coefficients and renders the result (markdown or JSON).

Usage (from the repository root):
    python benchmarks/plan_quality.py [--calibration FILE | --held-out] [--details] [--json]

``--held-out`` ranks each sweep with coefficients fitted (from the physics priors) on every seed row except
those of the sweep's source table, so the planner has never seen the rows it is judged on.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from autotune.calibration.cases import prepare_cases
from autotune.calibration.crossval import fit_from_priors
from autotune.calibration.plan_quality import (
    NOMINAL_SAMPLES,
    Candidate,
    Outcome,
    Sweep,
    find_sweeps,
    judge,
    planner_predictor,
    table_of,
    tally,
)
from autotune.costmodel.calibration import default_coefficients, load_coefficients
from autotune.profiles.measurements import all_measurements
from autotune.schemas.calibration import CostCoefficients


def _hours(seconds: float | None) -> str:
    """Seconds as h:mm:ss, or a dash."""
    if seconds is None:
        return "—"
    hours, rest = divmod(round(seconds), 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"


def _measured(candidate: Candidate | None, basis: str) -> str:
    if candidate is None:
        return "—"
    if not candidate.ran:
        return "OOM"
    value = candidate.measured_time_s(basis)
    if value is None:
        return "ran"
    return _hours(value) if basis.startswith("run") else f"{value:.3g} s/seq"


def _setting(candidate: Candidate | None) -> str:
    return "nothing fits" if candidate is None else candidate.setting.short()


def summary_line(outcomes: Sequence[Outcome], skipped: int) -> str:
    """One line: how often the planner picked the fastest, ratios, failures, and what could not be compared."""
    counts = tally(outcomes, skipped)
    parts = [
        f"{counts.sweeps} sweeps: planner picked the fastest measured setting in "
        f"{counts.best}/{len(counts.ratios)} comparable sweeps",
    ]
    if counts.ratios:
        parts.append(f"median ratio {counts.median_ratio:.2f}, worst {counts.worst_ratio:.2f}")
    parts.append(
        f"failures: {counts.chose_oom} chose a setting that ran out of memory, "
        f"{counts.refused} predicted nothing fits although a setting ran"
    )
    parts.append(f"{counts.correct_refusals} correct refusals (nothing ran)")
    if counts.assumed_same_data:
        parts.append(f"{counts.assumed_same_data} compared under the same-data assumption (dataset not stated)")
    if counts.not_comparable:
        parts.append(f"{counts.not_comparable} not comparable")
    parts.append(f"{counts.skipped} single-setting groups skipped")
    return "; ".join(parts) + "."


def _skipped_text(skipped: Sequence[str], listed_up_to: int = 4) -> str:
    """Skipped groups per table: listed when few, else counted."""
    by_table: dict[str, list[str]] = {}
    for label in skipped:
        table, rest = label.split(": ", 1)
        by_table.setdefault(table, []).append(rest)
    parts = []
    for table, rests in by_table.items():
        if len(rests) <= listed_up_to:
            parts.append(f"{table}: " + "; ".join(rests))
        else:
            parts.append(f"{table}: {len(rests)} groups (one row per model × GPU × method)")
    return ". ".join(parts)


def markdown(outcomes: Sequence[Outcome], skipped: Sequence[str], calibration: str, details: bool) -> str:
    """The paste-ready markdown table, notes, optional per-candidate details, and the summary line."""
    lines = [
        f"### Plan quality on the seed sweeps (calibration: {calibration})",
        "",
        "| sweep | settings ran / OOM | predicted to fit | planner's choice | its measured result "
        "| fastest that ran | ratio | status |",
        "|---|---:|---:|---|---:|---|---:|---|",
    ]
    for o in outcomes:
        ran = sum(c.ran for c in o.sweep.candidates)
        fastest = "—" if o.fastest is None else f"{_setting(o.fastest)} ({_measured(o.fastest, o.sweep.basis)})"
        lines.append(
            f"| {o.sweep.label} | {ran} / {len(o.sweep.candidates) - ran} | {o.predicted_fit} "
            f"| {_setting(o.chosen)} | {_measured(o.chosen, o.sweep.basis)} | {fastest} "
            f"| {'—' if o.ratio is None else f'{o.ratio:.2f}'} | {o.status} |"
        )
    lines += ["", "Notes:"]
    for o in outcomes:
        note = f"- {o.sweep.label}: {o.sweep.note}"
        if o.stable_for_larger_datasets is not None:
            note += f"; ranked at a nominal {NOMINAL_SAMPLES:,} samples, " + (
                "same choice for every larger dataset"
                if o.stable_for_larger_datasets
                else "the choice changes for larger datasets (compile amortization)"
            )
        if o.verdict_errors:
            note += f"; wrong fit verdicts: {', '.join(o.verdict_errors)}"
        lines.append(note + ".")
    if skipped:
        lines.append(f"- Skipped (one measured setting that ran, nothing to choose): {_skipped_text(skipped)}.")
    if details:
        lines += [
            "",
            f"Per candidate (predicted run at the nominal {NOMINAL_SAMPLES:,} samples where the dataset is not "
            "stated: only its ranking is meaningful there):",
            "",
            "| sweep | row | setting | measured | predicted run | predicted fits |",
            "|---|---|---|---:|---:|---|",
        ]
        for o in outcomes:
            for c in o.sweep.candidates:
                p = o.predictions[c.id]
                predicted = _hours(p.run_time_s) if p.run_time_s >= 1 else f"{p.run_time_s:.3g} s/seq"
                lines.append(
                    f"| {o.sweep.label} | {c.id} | {c.setting.short()} | {_measured(c, o.sweep.basis)} "
                    f"| {predicted} | {'yes' if p.fits else 'no'} |"
                )
    lines += ["", summary_line(outcomes, len(skipped))]
    return "\n".join(lines)


def as_json(outcomes: Sequence[Outcome], skipped: Sequence[str], calibration: str) -> dict[str, object]:
    """The same figures as a JSON-ready dict."""
    return {
        "calibration": calibration,
        "sweeps": [
            {
                "sweep": o.sweep.label,
                "basis": o.sweep.basis,
                "note": o.sweep.note,
                "status": o.status,
                "ratio": o.ratio,
                "chosen": None if o.chosen is None else o.chosen.id,
                "fastest": None if o.fastest is None else o.fastest.id,
                "predicted_fit": o.predicted_fit,
                "candidates": len(o.sweep.candidates),
                "verdict_errors": list(o.verdict_errors),
                "stable_for_larger_datasets": o.stable_for_larger_datasets,
            }
            for o in outcomes
        ],
        "skipped": list(skipped),
        "summary": summary_line(outcomes, len(skipped)),
    }


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    choice = parser.add_mutually_exclusive_group()
    choice.add_argument("--calibration", type=Path, help="calibration YAML (default: the shipped seeds.yaml)")
    choice.add_argument("--held-out", action="store_true", help="rank each sweep with a fit that excludes its table")
    parser.add_argument("--details", action="store_true", help="list every candidate's measured and predicted time")
    parser.add_argument("--json", action="store_true", help="print JSON instead of markdown")
    args = parser.parse_args(argv)

    measurements = all_measurements()
    sweeps, skipped = find_sweeps(measurements)
    if args.held_out:
        cases = prepare_cases(measurements)
        fits: dict[str, CostCoefficients] = {}

        def coefficients_for(sweep: Sweep) -> CostCoefficients:
            table = sweep.label.split(":")[0]
            if table not in fits:
                print(f"fitting without table {table} ...", file=sys.stderr)
                training = [c for c in cases if table_of(c.measurement.source) != table]
                fits[table] = fit_from_priors(training, f"without-{table}")
            return fits[table]

        calibration = "held out: fitted without the sweep's own table"
    else:
        coefficients = load_coefficients(args.calibration) if args.calibration else default_coefficients()
        calibration = str(args.calibration) if args.calibration else "shipped seeds.yaml"

        def coefficients_for(sweep: Sweep) -> CostCoefficients:
            return coefficients

    predict = planner_predictor(coefficients_for)
    outcomes = [judge(sweep, predict) for sweep in sweeps]
    if args.json:
        print(json.dumps(as_json(outcomes, skipped, calibration), indent=2))
    else:
        print(markdown(outcomes, skipped, calibration, args.details))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
