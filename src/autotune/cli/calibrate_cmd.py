"""``autotune calibrate``: refit the cost model from your own runs and show the error before and after.

Inputs are run directories written by ``autotune launch`` (``run_report.json`` + ``plan.yaml``), CSV files
of measurements (docs/calibration.md) and measurement-set YAML files. The calibration is written to the
user config dir by default, where ``plan`` and ``estimate`` pick it up. ``--template FILE`` writes an empty CSV
(every column with its allowed values and default) instead; with ``--suggest K --model M --gpu G`` it holds the K
settings to measure first (``cli/suggest_options.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from autotune.calibration.recalibrate import collect
from autotune.cli.console import console
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
from autotune.cli.setting_options import takes_option_groups
from autotune.cli.suggest_options import write_suggestions
from autotune.errors import InvalidRequestError
from autotune.fileio import write_atomic
from autotune.profiles.csv_template import csv_template
from autotune.schemas.plan_io import load_plan
from autotune.session.option_groups import NO_SUGGESTION, SuggestOptions

EPILOG = CONFIG_DIR_EPILOG
"""The end of this command's help (the command table in app.py reads it)."""


TemplateOpt = Annotated[
    Path | None,
    typer.Option(
        "--template",
        metavar="FILE",
        help="Write an empty CSV of measurements to FILE (every column, with its allowed values and default in "
        "# comment lines) and stop; FILE must not exist.",
    ),
]


@takes_option_groups()
def calibrate_command(
    inputs: Annotated[
        list[Path] | None,
        typer.Argument(
            metavar="RUN_DIR_OR_CSV",
            help="Run directories written by autotune launch, CSV files of measurements (docs/calibration.md) "
            "or measurement-set YAML files (required unless --template).",
            show_default=False,
        ),
    ] = None,
    output: OutputOpt = None,
    with_seeds: SeedsOpt = False,
    name: NameOpt = None,
    calibration: StartOpt = None,
    template: TemplateOpt = None,
    suggest: SuggestOptions = NO_SUGGESTION,
) -> None:
    """Refit the cost model's time coefficients from your runs and write a calibration file.

    Fits measured times (and reserved memory, when a row measured it); peak allocated memory is derived from
    the architecture and setting, not fitted, so a calibration leaves its predictions unchanged.
    """
    if suggest.stray_flags():
        raise InvalidRequestError(f"{', '.join(suggest.stray_flags())} only go with --suggest K")
    if suggest.suggest is not None or template is not None:
        write_template(suggest, template, calibration, given_flags(inputs, output, name, calibration, with_seeds))
        return
    if not inputs:
        raise InvalidRequestError(
            "give run directories, CSV files or measurement-set YAML files to calibrate from "
            "(or --template FILE for an empty CSV)"
        )
    target = resolve_output(output)
    collected = collect(inputs, load_plan)
    print_collected(collected)
    result, start = fit_and_write(collected, target, with_seeds=with_seeds, name=name, start_file=calibration)
    render_recalibration(result, target, start=start)


def given_flags(
    inputs: list[Path] | None, output: Path | None, name: str | None, calibration: Path | None, with_seeds: bool
) -> list[str]:
    """The calibrating options given (``RUN_DIR_OR_CSV``, ``-o``, ``--name``, ``--calibration``, ``--with-seeds``)."""
    values = (("RUN_DIR_OR_CSV", inputs), ("-o", output), ("--name", name), ("--calibration", calibration))
    return [flag for flag, value in values if value] + (["--with-seeds"] if with_seeds else [])


def write_template(suggest: SuggestOptions, template: Path | None, calibration: Path | None, given: list[str]) -> None:
    """``--template FILE``: the empty CSV, or with ``--suggest K`` the K settings to measure first.

    Raises:
        InvalidRequestError: ``--suggest`` without ``--template``, or calibrating options beside them (they would be
            ignored), in one line.
    """
    if suggest.suggest is not None:
        named = [flag for flag in given if flag != "--calibration"]
        if named or template is None:
            raise InvalidRequestError(
                "--suggest K writes the settings to measure to --template FILE and calibrates nothing: give "
                "--template FILE" + (f", without {', '.join(named)}" if named else "")
            )
        write_suggestions(suggest, template, calibration)
        return
    assert template is not None
    if given:
        raise InvalidRequestError(
            f"--template writes an empty CSV and calibrates nothing: {', '.join(given)} would be ignored; give "
            "--template FILE alone"
        )
    write_atomic(template, csv_template(), what="CSV template")
    console().print(f"[green]wrote[/] {template}: fill in one row per run, then autotune calibrate {template}")
