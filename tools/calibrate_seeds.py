"""Produce the shipped calibration ``src/autotune/profiles/calibration/seeds.yaml`` from the seed tables.

1. Fit the free coefficients on every transcribed seed row (``calibration.fit.fit_coefficients`` from the physics
   priors).
2. Cross-validate: leave one GPU out and leave one model family out (``calibration.crossval``).
3. Replace the three band dicts (memory, headroom, time) with the bands of the held-out residuals of both
   groupings pooled (``crossval.held_out_bands``): the planner's headroom and every ± a plan prints then come
   from errors on rows the fit did not see.
4. Write the YAML with provenance (what was fitted, the date, the command).

Usage (from the repository root; about 13 fits of ~7 s each on 2 cores):
    python tools/calibrate_seeds.py            # write the shipped file
    python tools/calibrate_seeds.py --check    # print the diff against the shipped file, write nothing
    python tools/calibrate_seeds.py --output /tmp/seeds.yaml

``--check`` exits with 1 when a coefficient or band differs from the shipped file (provenance lines — the
date — are ignored), else 0.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import difflib
import sys
import time
from pathlib import Path

import yaml

from autotune.calibration.cases import prepare_cases
from autotune.calibration.crossval import ProgressFunction, cross_validate, fit_from_priors, held_out_bands
from autotune.costmodel.calibration import save_coefficients
from autotune.profiles.measurements import all_measurements, list_measurement_sets
from autotune.schemas.calibration import CostCoefficients

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "src" / "autotune" / "profiles" / "calibration" / "seeds.yaml"
COMMAND = "python tools/calibrate_seeds.py"


def _progress(started: float) -> ProgressFunction:
    """Progress lines on stderr (each fit takes several seconds)."""

    def report(label: str, index: int, total: int) -> None:
        print(f"  [{index}/{total}] fitting {label} ({time.perf_counter() - started:.0f} s)", file=sys.stderr)

    return report


def build_calibration(today: str | None = None) -> CostCoefficients:
    """Fit on all seed rows, then put the held-out bands (leave-one-GPU-out + leave-one-family-out) in."""
    started = time.perf_counter()
    cases = prepare_cases(all_measurements())
    print(f"fitting on {len(cases)} rows", file=sys.stderr)
    full = fit_from_priors(cases, "seeds")
    reports = []
    for groups in ("gpu", "family"):
        reports.append(cross_validate(cases, groups, full_fit=full, progress=_progress(started)))
    memory_band, headroom_band, time_band = held_out_bands(*reports)
    sets = ", ".join(s.name for s in list_measurement_sets())
    folds = " + ".join(f"{len(r.folds)} {r.label} folds" for r in reports)
    source = (
        f"fitted on {len(cases)} measurements ({sets}) by autotune.calibration.fit.fit_coefficients "
        f"from the physics priors; error bands = 90th percentile of held-out residuals per family "
        f"({folds}, {sum(len(r.held_out) for r in reports)} held-out predictions pooled; "
        f"autotune.calibration.crossval.held_out_bands); {today or _dt.date.today().isoformat()}; "
        f"command: {COMMAND}"
    )
    return full.model_copy(
        update={
            "name": "seeds",
            "source": source,
            "memory_error_band": memory_band,
            "memory_headroom_band": headroom_band,
            "time_error_band": time_band,
        }
    )


def _yaml_text(coefficients: CostCoefficients) -> str:
    return yaml.safe_dump(coefficients.model_dump(mode="json"), sort_keys=False)


def _without_provenance(text: str) -> dict[str, object]:
    data = yaml.safe_load(text) or {}
    data.pop("source", None)
    return data


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="print the diff against the shipped file; write nothing")
    parser.add_argument("--output", type=Path, default=SHIPPED, help=f"where to write (default {SHIPPED})")
    args = parser.parse_args(argv)

    coefficients = build_calibration()
    new_text = _yaml_text(coefficients)
    if args.check:
        old_text = args.output.read_text(encoding="utf-8") if args.output.is_file() else ""
        diff = list(
            difflib.unified_diff(
                old_text.splitlines(keepends=True),
                new_text.splitlines(keepends=True),
                fromfile=f"{args.output} (shipped)",
                tofile=f"{args.output} (refitted)",
            )
        )
        sys.stdout.writelines(diff or ["no difference\n"])
        changed = _without_provenance(old_text) != _without_provenance(new_text)
        print("coefficients or bands differ" if changed else "coefficients and bands unchanged (provenance aside)")
        return 1 if changed else 0
    save_coefficients(coefficients, args.output, overwrite=True)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
