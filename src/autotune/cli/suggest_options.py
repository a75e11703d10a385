"""``calibrate --suggest K``'s options, one typed group, and what the command does with them (issue 43).

:class:`SuggestOptions` declares the options once (a field per option, typed with the typer option that parses it);
``calibrate`` takes them as one parameter, ``suggest: SuggestOptions``, through :func:`takes_option_group`, which puts
one typer option per field into the command's signature and hands the command the group built from them.
:func:`write_suggestions` plans the space (one planner request per ``--seq-len``), picks the K settings
(``calibration.suggest``) and writes them as the calibrate CSV for the user to fill in.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Annotated, Any

import typer

from autotune.calibration.suggest import band_text, describe, suggest, template_cells
from autotune.cli._shared import coefficients_from_option
from autotune.cli.console import console
from autotune.cli.resolve import build_request
from autotune.errors import InvalidRequestError
from autotune.fileio import write_atomic
from autotune.planner.request import Overrides
from autotune.profiles.measurement_csv import csv_with_rows
from autotune.schemas.setting import DEFAULT_SEQ_LEN


@dataclass(frozen=True)
class SuggestOptions:
    """``calibrate --suggest K``: the model, GPU and plan space to suggest settings for; None = not given."""

    suggest: Annotated[
        int | None,
        typer.Option(
            "--suggest",
            metavar="K",
            min=1,
            max=50,
            help="Write the K settings whose measurement most narrows the time predictions over the plan space of "
            "--model / --gpu (a CSV to fill in, at --template FILE) instead of calibrating.",
        ),
    ] = None
    model: Annotated[str | None, typer.Option("--model", help="With --suggest: the model you will train.")] = None
    gpu: Annotated[str | None, typer.Option("--gpu", help="With --suggest: the GPU you will train on.")] = None
    num_gpus: Annotated[int, typer.Option("--num-gpus", min=1, max=64, help="With --suggest: GPUs (one node).")] = 1
    seq_len: Annotated[
        list[int] | None,
        typer.Option(
            "--seq-len",
            min=8,
            help="With --suggest: a sequence length you will choose among; repeat for several "
            f"(default {DEFAULT_SEQ_LEN}).",
        ),
    ] = None

    def given(self) -> list[str]:
        """The --suggest-only options given without --suggest (the flags, for an error line)."""
        if self.suggest is not None:
            return []
        values = (("--model", self.model), ("--gpu", self.gpu), ("--seq-len", self.seq_len))
        return [flag for flag, value in values if value] + (["--num-gpus"] if self.num_gpus != 1 else [])


NO_SUGGESTION = SuggestOptions()
"""The group's defaults: no --suggest."""

CommandT = typing.TypeVar("CommandT", bound=Callable[..., None])


def takes_option_group(name: str, group: type[SuggestOptions]) -> Callable[[CommandT], Callable[..., None]]:
    """Decorate a command whose parameter ``name`` stands for every option of the dataclass ``group``.

    The command's signature gets one keyword parameter per field of ``group`` in place of ``name`` (what typer
    reads); the wrapper builds the group from them and calls the command with it.
    """
    hints = typing.get_type_hints(group, include_extras=True)
    options = [
        inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=hints[f.name])
        for f in fields(group)
    ]

    def decorate(command: CommandT) -> Callable[..., None]:
        signature = inspect.signature(command)
        own = typing.get_type_hints(command, include_extras=True)
        parameters = []
        for parameter in signature.parameters.values():
            if parameter.name == name:
                parameters += options
            else:
                parameters.append(
                    parameter.replace(kind=inspect.Parameter.KEYWORD_ONLY, annotation=own[parameter.name])
                )

        @functools.wraps(command)
        def wrapper(**values: Any) -> None:
            built = group(**{f.name: values.pop(f.name) for f in fields(group)})
            command(**values, **{name: built})

        wrapper.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
        return wrapper

    return decorate


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
    coefficients, calibration_name = coefficients_from_option(calibration)
    requests = []
    for seq_len in options.seq_len or [DEFAULT_SEQ_LEN]:
        request, _ = build_request(
            model=options.model,
            gpu=options.gpu,
            num_gpus=options.num_gpus,
            num_nodes=1,
            host_memory_gib=None,
            seq_len=seq_len,
            global_batch_size=32,
            num_samples=None,
            dataset_tokens=None,
            epochs=1.0,
            objective="quality",
            overrides=Overrides(),
            coefficients=coefficients,
            calibration_name=calibration_name,
        )
        requests.append(request)
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
