"""Three of the core's runs calibrate to within its current error (issue 43): calibrate on three, predict the rest.

For every choice of three run directories of one of the core's measurement folders (default
``src/autotune/profiles/measurements/autotune-core-h100/``; ``--runs`` another): what ``autotune calibrate RUN RUN RUN``
does (``recalibrate.collect`` + ``recalibrate.recalibrate`` from the shipped calibration, without the seed rows: the
command's default), then what ``autotune estimate --calibration THAT`` predicts for each other run's own setting
(``estimate.estimate_setting``), beside the shipped calibration's own prediction. Prints, per choice, the held-out
runs' tokens/s errors before → after and whether the measured time lies in the printed band; then the tokens/s MAPE
over every (choice, held-out run) pair before → after. "Within its current error": after ≤ before plus
``benchmarks/core_loo.py``'s mean (the core's leave-one-out error with four runs).

The shipped calibration was fitted with these runs (``time_fit``: the core's runs first), so this measures how far three
runs move a calibration that already describes their stack, not a blind prediction (``core_loo.py`` says the same).

Usage:  python benchmarks/core_three_runs.py [--runs DIR]      (~10 choices × a few seconds)
"""

from __future__ import annotations

import argparse
import math
import sys
from itertools import combinations
from pathlib import Path

from autotune.calibration.recalibrate import RefitRefused, collect, recalibrate
from autotune.costmodel.calibration import default_coefficients
from autotune.costmodel.estimate import estimate_setting
from autotune.profiles.measurements import CORE_SOURCE
from autotune.profiles.run_reports import load_run_report
from autotune.schemas.calibration import CostCoefficients
from autotune.schemas.plan_io import load_plan

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "src" / "autotune" / "profiles" / "measurements" / CORE_SOURCE
CALIBRATION_ROWS = 3


def held_out_error(run: Path, coefficients: CostCoefficients) -> tuple[float, bool]:
    """(predicted tokens/s / measured − 1, measured time within the printed band) of one run under ``coefficients``."""
    (case,) = collect([run], load_plan).cases
    m = case.measurement
    estimate = estimate_setting(case.model, case.cluster, m.workload, m.setting, coefficients)
    measured = load_run_report(run).tokens_per_s_measured or 0.0
    ratio = estimate.tokens_per_s / measured
    return ratio - 1, abs(math.log(ratio)) <= math.log1p(estimate.time_uncertainty_fraction) + 1e-12


def main(argv: list[str] | None = None) -> int:
    """Calibrate on each choice of three runs and print the held-out runs' errors; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, default=RUNS, help="folder of the core's run directories")
    args = parser.parse_args(argv)
    runs = sorted(path for path in args.runs.iterdir() if (path / "run_report.json").is_file())
    start = default_coefficients()
    print(f"{len(runs)} runs in {args.runs}: calibrate on each {CALIBRATION_ROWS}, predict the others (shipped start)")
    before, after, covered = [], [], []
    for chosen in combinations(runs, CALIBRATION_ROWS):
        training = collect(chosen, load_plan)
        try:
            fitted = recalibrate(
                training.cases, start, start_name="shipped", sources=training.sources, with_seeds=False, name="three"
            ).coefficients
        except RefitRefused:
            fitted = start
        cells = []
        for held in (run for run in runs if run not in chosen):
            error_before, _ = held_out_error(held, start)
            error_after, inside = held_out_error(held, fitted)
            before.append(abs(error_before))
            after.append(abs(error_after))
            covered.append(inside)
            cells.append(f"{held.name} {error_before:+.1%} → {error_after:+.1%}{'' if inside else ' (outside band)'}")
        print(f"{' + '.join(r.name for r in chosen)}: time_scale {fitted.time_scale:.3g}; {'; '.join(cells)}")
    count = len(before)
    print(
        f"held-out tokens/s MAPE over {count} (choice, run) pairs: shipped {sum(before) / count:.1%} → "
        f"calibrated on three {sum(after) / count:.1%}; measured within the printed band {sum(covered)}/{count}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
