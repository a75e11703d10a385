"""``autotune calibrate``: refit the cost model from your own runs and show the error before and after.

Inputs are run directories written by ``autotune launch`` (``run_report.json`` + ``plan.yaml``), CSV files
of measurements (docs/calibration.md) and measurement-set YAML files. The calibration is written to the
user config dir by default, where ``plan`` and ``estimate`` pick it up.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from autotune.calibration.recalibrate import collect
from autotune.cli.refit import (
    CONFIG_DIR_EPILOG,
    NameOpt,
    OutputOpt,
    SeedsOpt,
    StartOpt,
    fit_and_write,
    print_collected,
    render_recalibration,
    resolve_output,
)
from autotune.schemas.plan_io import load_plan

EPILOG = CONFIG_DIR_EPILOG
"""The end of this command's help (the command table in app.py reads it)."""


def calibrate_command(
    inputs: Annotated[
        list[Path],
        typer.Argument(
            metavar="RUN_DIR_OR_CSV...",
            help="Run directories written by autotune launch, CSV files of measurements (docs/calibration.md) "
            "or measurement-set YAML files.",
        ),
    ],
    output: OutputOpt = None,
    with_seeds: SeedsOpt = False,
    name: NameOpt = None,
    calibration: StartOpt = None,
) -> None:
    """Refit the cost model's time coefficients from your runs and write a calibration file.

    Fits measured times (and reserved memory, when a row measured it); peak allocated memory is derived from
    the architecture and setting, not fitted, so a calibration leaves its predictions unchanged.
    """
    target = resolve_output(output)
    collected = collect(inputs, load_plan)
    print_collected(collected)
    result, start = fit_and_write(collected, target, with_seeds=with_seeds, name=name, start_file=calibration)
    render_recalibration(result, target, default_output=output is None, start=start)
