"""What ``calibrate --suggest K`` does with its options (issue 43).

The options are one typed group, :class:`autotune.session.option_groups.SuggestOptions`, which ``calibrate`` takes as
one parameter (:func:`autotune.cli.setting_options.takes_option_groups`). :func:`write_suggestions` plans the
space (one planner request per ``--seq-len``), picks the K settings
(``calibration.suggest``) and writes them as the calibrate CSV for the user to fill in.
"""

from __future__ import annotations

from pathlib import Path

from autotune.calibration.suggest import band_text, describe, suggest, template_cells
from autotune.cli.console import console
from autotune.errors import InvalidRequestError
from autotune.fileio import write_atomic
from autotune.profiles.csv_template import csv_with_rows
from autotune.schemas.setting import DEFAULT_SEQ_LEN
from autotune.session.calibration_choice import calibration_file, coefficients_from_option
from autotune.session.option_groups import SuggestOptions
from autotune.session.planning import PlanOptions, request_from_options


def write_suggestions(options: SuggestOptions, template: Path, calibration: Path | None) -> None:
    """Plan the space, pick ``--suggest`` K settings and write them to ``template`` as the calibrate CSV.

    Raises:
        InvalidRequestError: --model or --gpu missing.
        AutotuneError: an unknown model or GPU, an invalid value, or ``template`` exists (one line each).
    """
    missing = [flag for flag, value in (("--model", options.model), ("--gpu", options.gpu)) if not value]
    if missing:
        raise InvalidRequestError(f"--suggest needs {' and '.join(missing)}: the model and GPU you will train on")
    assert options.suggest is not None and options.model is not None and options.gpu is not None
    if template.exists():
        raise InvalidRequestError(f"{template} exists: choose another path with --template (nothing was overwritten)")
    path = calibration_file(calibration)  # its note once, not once per sequence length
    coefficients, calibration_name = coefficients_from_option(path)
    requests = [
        request_from_options(
            PlanOptions(
                model=options.model, gpu=options.gpu, num_gpus=options.num_gpus, seq_len=seq_len, calibration=path
            )
        )[0]
        for seq_len in options.seq_len or [DEFAULT_SEQ_LEN]
    ]
    space, selection = suggest(requests, options.suggest, coefficients)
    if not space:
        raise InvalidRequestError(
            f"no setting of {options.model} fits {options.num_gpus}× {options.gpu}: nothing to suggest"
        )
    picked = [space[i] for i in selection.chosen]
    note = (
        f"autotune calibrate --suggest {options.suggest}: the {len(picked)} settings of {options.model} on "
        f"{options.num_gpus}x {options.gpu} whose times most narrow the predictions over {len(space)} that fit; "
        "measure each, fill in micro_step_time_s (or step_time_s), then: autotune calibrate THIS_FILE"
    )
    write_atomic(template, csv_with_rows([template_cells(c) for c in picked], note), what="CSV template")
    for order, candidate in enumerate(picked, start=1):
        console().print(f"  {order}. {describe(candidate)}", markup=False)
    console().print(f"{band_text(selection)} (calibration '{calibration_name}')", markup=False)
    console().print(
        f"[green]wrote[/] {template}: measure these settings, fill in the times, then autotune calibrate {template}"
    )
