"""Leave-one-out over the project's own H100 runs: calibrate on four run directories, predict the fifth.

For each run directory in ``src/autotune/profiles/measurements/autotune-core-h100/``: what ``autotune calibrate
OTHER_FOUR`` does (``recalibrate.collect`` + ``recalibrate.recalibrate`` from the shipped calibration, without the
seed rows: the command's default), then what ``autotune estimate --calibration THAT`` predicts for the held-out
run's own setting (``estimate.estimate_setting``). Prints predicted vs measured tokens/s and peak allocated memory
per run, and whether each is within the targets of issue 18 (tokens/s ±10 %, peak allocated ±3 %).

The shipped calibration itself was fitted with all five runs (``time_fit``: the core's runs first), so a held-out
run is not unseen by the coefficients the recalibration starts from: the table measures how well a recalibration on
four runs keeps the fifth, not a blind prediction. ``--priors`` starts from the physics priors instead.

Usage:  python benchmarks/core_loo.py [--priors]      (~10 s)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from autotune.calibration.recalibrate import collect, recalibrate
from autotune.costmodel.calibration import default_coefficients
from autotune.costmodel.estimate import estimate_setting
from autotune.profiles.measurements import CORE_SOURCE
from autotune.profiles.run_reports import load_run_report
from autotune.schemas.calibration import CostCoefficients
from autotune.schemas.plan_io import load_plan

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "src" / "autotune" / "profiles" / "measurements" / CORE_SOURCE
TOKENS_TARGET = 0.10
MEMORY_TARGET = 0.03


def main(argv: list[str] | None = None) -> int:
    """Run the leave-one-out and print each held-out run's measured and predicted figures; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--priors", action="store_true", help="start each refit from the physics priors")
    args = parser.parse_args(argv)
    runs = sorted(path for path in RUNS.iterdir() if (path / "run_report.json").is_file())
    start = CostCoefficients() if args.priors else default_coefficients()
    print(f"leave-one-out over {len(runs)} runs ({RUNS.relative_to(ROOT)}), refit from the "
          f"{'physics priors' if args.priors else 'shipped calibration'} without the seed rows")  # fmt: skip
    print(
        f"{'held out':22s} {'tokens/s meas':>13s} {'pred':>7s} {'error':>7s}   "
        f"{'peak GiB meas':>13s} {'pred':>6s} {'error':>7s}   within"
    )
    misses = 0
    for held in runs:
        others = [run for run in runs if run != held]
        training = collect(others, load_plan)
        fitted = recalibrate(
            training.cases, start, start_name="start", sources=training.sources, with_seeds=False, name="loo"
        ).coefficients
        (case,) = collect([held], load_plan).cases
        m = case.measurement
        estimate = estimate_setting(case.model, case.cluster, m.workload, m.setting, fitted)
        report = load_run_report(held)
        measured_tps = report.tokens_per_s_measured or 0.0
        tps_error = estimate.tokens_per_s / measured_tps - 1
        memory_error = estimate.peak_memory_gib / (m.peak_memory_gib or 1.0) - 1
        ok_tps, ok_mem = abs(tps_error) <= TOKENS_TARGET, abs(memory_error) <= MEMORY_TARGET
        misses += (not ok_tps) + (not ok_mem)
        print(
            f"{held.name:22s} {measured_tps:13,.0f} {estimate.tokens_per_s:7,.0f} {tps_error:+7.1%}   "
            f"{m.peak_memory_gib:13.2f} {estimate.peak_memory_gib:6.2f} {memory_error:+7.1%}   "
            f"tokens/s {'yes' if ok_tps else 'NO'}, memory {'yes' if ok_mem else 'NO'}"
        )
    print(f"{misses} of {2 * len(runs)} figures outside the targets (tokens/s ±10 %, peak allocated ±3 %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
