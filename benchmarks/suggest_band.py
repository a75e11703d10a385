"""Does ``calibrate --suggest``'s "±B % after these K" read the band ``calibrate`` then prints (issue 43)?

Per source of ``calibration_trials.py`` (one stack on one card, its blind start, ``trial_groups``): the ``--k`` rows
``--suggest`` picks with the source's own rows as the plan space (``trial_groups.suggested_draw``'s choice), the mean
80 % band it reports before any row and after them (``suggest.Selection.mean_band``: each amplitude of the prior
conditioned on the picks, their mixture's band), beside the one matched amplitude conditioned on them (the band of the
mean variance, as ``--suggest`` reported it before 2026-11-29), and what ``calibrate`` on those rows then prints on the
source's other rows (each held-out row's ``time_uncertainty_fraction``: least–most, mean) with the share of them inside.

Usage:  python benchmarks/suggest_band.py [--k 3] [--cache DIR]
        (``--cache DIR``: the blind starts as in ``calibration_trials.py --cache``; ~3 min without it, seconds with)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibration_trials import covered
from trial_groups import blind_start, groups

from autotune.calibration.coverage import row_point
from autotune.calibration.recalibrate import RefitRefused, recalibrate
from autotune.calibration.results import evaluate
from autotune.calibration.suggest import Variances, greedy_variance_reduction
from autotune.calibration.time_fit import time_rows
from autotune.costmodel.time_correction import time_band
from autotune.schemas.calibration import CostCoefficients


def main(argv: list[str] | None = None) -> int:
    """Print one line per source; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, default=3, help="rows --suggest picks (default 3)")
    parser.add_argument("--cache", type=Path, default=None, help="folder that keeps the blind starts between runs")
    args = parser.parse_args(argv)
    starts: dict[str, CostCoefficients] = {}
    for group in groups(args.k + 2):
        start = blind_start(group, starts, args.cache)
        points = [row_point(row) for row in time_rows(group.timed)]
        selection = greedy_variance_reduction(points, args.k, Variances.of(start, time_rows(group.outside_set)))
        rows = [group.timed[i] for i in selection.chosen]
        held = [c for c in group.timed if c not in rows]
        try:
            fitted = recalibrate(
                rows,
                start,
                start_name="blind",
                sources=[group.name],
                with_seeds=False,
                name="trial",
                seed_cases=group.outside_set,
            ).coefficients
        except RefitRefused:
            print(f"{group.name:40s} refit refused: nothing printed")
            continue
        after = evaluate(held, fitted)
        bands = [r.estimate.time_uncertainty_fraction for r in after]
        inside = sum(covered(r) for r in after) / len(after)
        print(
            f"{group.name:40s} --suggest ±{selection.mean_band(0):.0%} → ±{selection.mean_band(args.k):.0%} after "
            f"{args.k} (one matched amplitude ±{time_band(selection.mean_variance[args.k]):.0%}); calibrate prints "
            f"±{min(bands):.0%}–{max(bands):.0%} (mean ±{sum(bands) / len(bands):.0%}) on {len(held)} held-out rows, "
            f"{inside:.0%} inside"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
