"""Time-model accuracy held out by source: tokens/s MAPE and within-sweep Spearman ρ per source table.

Leave-one-source-out (``crossval.cross_validate(..., "source")``): each source table (seed 000, 001, 003 and the
llm-foundry MPT development data) is predicted by coefficients fitted from the physics priors on the other
tables only — the seeds held out when fitting MPT rows, and the reverse. Prints, per source, the time MAPE
(= tokens/s error: same tokens, inverse time, reported as |predicted/measured − 1| of the time) and the Spearman ρ
of measured vs predicted throughput inside every sweep (``calibration.ranking``), in-sample and held out, and the
mean signed time error per source split by activation checkpointing (a bias between the two shows in the order of
settings the planner compares).

Usage (from the repository root; 5 fits, a few minutes on 2 cores):
    python benchmarks/time_accuracy.py [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Sequence

from autotune.calibration.cases import prepare_cases
from autotune.calibration.crossval import cross_validate, fit_from_priors
from autotune.calibration.ranking import by_source
from autotune.calibration.results import CaseResult
from autotune.profiles.measurements import all_measurements
from autotune.schemas.calibration import source_table
from autotune.session.validation_text import ranking_text


def signed_error_by_checkpointing(results: Sequence[CaseResult]) -> list[str]:
    """Per source and activation checkpointing: rows, mean and range of predicted / measured time − 1."""
    groups: dict[tuple[str, bool], list[float]] = defaultdict(list)
    for result in results:
        if result.predicted_time_s is None or result.measured_time_s is None:
            continue
        key = (source_table(result.case.measurement.source), result.case.measurement.setting.grad_ckpt)
        groups[key].append(result.predicted_time_s / result.measured_time_s - 1)
    return [
        f"  {source[:24]:24s} checkpointing {'on ' if ckpt else 'off'}  rows {len(errors):3d}  "
        f"mean {statistics.mean(errors):+.1%}  range {min(errors):+.1%} to {max(errors):+.1%}"
        for (source, ckpt), errors in sorted(groups.items())
    ]


def main(argv: list[str] | None = None) -> int:
    """Run the leave-one-source-out validation and print it; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    cases = prepare_cases(all_measurements())

    def progress(label: str, index: int, total: int) -> None:
        print(f"  [{index}/{total}] fitting {label} ({time.perf_counter() - started:.0f} s)", file=sys.stderr)

    full = fit_from_priors(cases, "in-sample")
    report = cross_validate(cases, "source", full_fit=full, progress=progress)
    in_sample, held_out = by_source(report.in_sample), by_source(report.held_out)
    if args.json:
        print(
            json.dumps(
                {"in_sample": [s.as_dict() for s in in_sample], "held_out": [s.as_dict() for s in held_out]}, indent=2
            )
        )
        return 0
    for line in ranking_text("in-sample (fit on every table)", in_sample):
        print(line)
    for line in ranking_text("leave-one-source-out (fit without the row's table)", held_out):
        print(line)
    print("\nper sweep, held out (ρ, time MAPE):")
    for s in held_out:
        for sweep in s.sweeps:
            rho = "—" if sweep.rho is None else f"{sweep.rho:+.2f}"
            print(f"  {s.source[:24]:24s} {sweep.label:40s} rows {sweep.rows:2d}  ρ {rho}  MAPE {sweep.mape:.1%}")
    print("\nsigned time error (predicted / measured − 1) by activation checkpointing, in-sample:")
    for line in signed_error_by_checkpointing(report.in_sample):
        print(line)
    print("held out:")
    for line in signed_error_by_checkpointing(report.held_out):
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
