"""Plan quality on the seed sweeps: how far the planner's choice is from the fastest measured setting that ran.

The logic (sweeps, the planner's choice, the judgement) is :mod:`autotune.planner.quality`; this script
chooses the coefficients and prints the result.

Usage (from the repository root):
    python benchmarks/plan_quality.py [--calibration FILE | --held-out] [--details] [--json]

``--held-out`` ranks each sweep with coefficients fitted (from the physics priors) on every seed row except
those of the sweep's source table, so the planner has never seen the rows it is judged on.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from autotune.costmodel.calibration import default_coefficients, load_coefficients
from autotune.costmodel.crossval import fit_from_priors
from autotune.costmodel.fitting import prepare_cases
from autotune.planner.quality import Sweep, as_json, find_sweeps, judge, markdown, planner_predictor, table_of
from autotune.profiles.measurements import all_measurements
from autotune.schemas.calibration import CostCoefficients


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
