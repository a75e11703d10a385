"""The setting options of ``plan``, ``estimate``, ``trace`` and ``sweep``: declared once, parsed into one typed set.

:class:`SettingOptions` is the one declaration: a field per setting option, typed with the typer option that parses it
(help from the schemas' field descriptions). A command takes them all as one parameter,
``setting: SettingOptions``, and is decorated with :func:`takes_setting_options`, which puts one typer option per field
into the command's signature (what typer reads) and hands the command one :class:`SettingOptions` built from them.

Every option defaults to None (not given): ``plan`` and ``sweep`` let the planner choose it, ``estimate`` and ``trace``
take the setting's default (:class:`autotune.schemas.setting.TrainingSetting`), shown in their help. Either way the
values are validated once, by :class:`autotune.planner.request.Overrides` (:meth:`SettingOptions.overrides`).
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from copy import copy
from dataclasses import asdict, dataclass, fields
from typing import Annotated, Any, TypeVar

import typer

from autotune.cli.resolve import validated
from autotune.planner.request import Overrides
from autotune.planner.space import LOSS_IMPLEMENTATIONS
from autotune.schemas.setting import DESCRIPTIONS, TrainingSetting, loss_impl_description

CommandT = TypeVar("CommandT", bound=Callable[..., None])

PLANNER_HELP = {"loss_impl": loss_impl_description(LOSS_IMPLEMENTATIONS)}
"""Help of ``plan`` and ``sweep`` where the planner accepts fewer values than a stated setting (``native`` describes
other trainers' losses: ``estimate`` and ``trace`` price it, the planner refuses it)."""

GPU_DEPENDENT = frozenset({"sharding", "precision"})
"""Options whose stated default depends on the cluster (:func:`autotune.schemas.setting.default_sharding`,
:func:`autotune.schemas.setting.default_precision`)."""


@dataclass(frozen=True)
class SettingOptions:
    """The setting options as given on the command line; None = not given.

    Types are the command line's (names as strings, ``lora_targets`` as ``'q_proj,v_proj'``); :meth:`overrides`
    turns them into the validated :class:`autotune.planner.request.Overrides`.
    """

    method: Annotated[str | None, typer.Option("--method", help=DESCRIPTIONS["method"])] = None
    micro_batch_size: Annotated[
        int | None, typer.Option("--micro-batch-size", help=DESCRIPTIONS["micro_batch_size"])
    ] = None
    grad_accum: Annotated[int | None, typer.Option("--grad-accum", help=DESCRIPTIONS["grad_accum"])] = None
    grad_ckpt: Annotated[bool | None, typer.Option("--grad-ckpt/--no-grad-ckpt", help=DESCRIPTIONS["grad_ckpt"])] = None
    compile: Annotated[bool | None, typer.Option("--compile/--no-compile", help=DESCRIPTIONS["compile"])] = None
    sharding: Annotated[str | None, typer.Option("--sharding", help=DESCRIPTIONS["sharding"])] = None
    optimizer: Annotated[str | None, typer.Option("--optimizer", help=DESCRIPTIONS["optimizer"])] = None
    precision: Annotated[str | None, typer.Option("--precision", help=DESCRIPTIONS["precision"])] = None
    lora_rank: Annotated[int | None, typer.Option("--lora-rank", help=DESCRIPTIONS["lora_rank"])] = None
    lora_alpha: Annotated[float | None, typer.Option("--lora-alpha", help=DESCRIPTIONS["lora_alpha"])] = None
    lora_dropout: Annotated[float | None, typer.Option("--lora-dropout", help=DESCRIPTIONS["lora_dropout"])] = None
    adapter_dtype: Annotated[str | None, typer.Option("--adapter-dtype", help=DESCRIPTIONS["adapter_dtype"])] = None
    kernels: Annotated[str | None, typer.Option("--kernels", help=DESCRIPTIONS["kernels"])] = None
    lora_targets: Annotated[str | None, typer.Option("--lora-targets", help=DESCRIPTIONS["lora_targets"])] = None
    loss_impl: Annotated[str | None, typer.Option("--loss-impl", help=DESCRIPTIONS["loss_impl"])] = None
    grad_sync: Annotated[str | None, typer.Option("--grad-sync", help=DESCRIPTIONS["grad_sync"])] = None
    optimizer_in_backward: Annotated[
        bool | None,
        typer.Option("--optimizer-in-backward/--no-optimizer-in-backward", help=DESCRIPTIONS["optimizer_in_backward"]),
    ] = None
    fp8: Annotated[bool | None, typer.Option("--fp8/--no-fp8", help=DESCRIPTIONS["fp8"])] = None
    attention_impl: Annotated[str | None, typer.Option("--attention-impl", help=DESCRIPTIONS["attention_impl"])] = None

    def given(self) -> dict[str, object]:
        """The options given (not None), by field name, ``lora_targets`` split at commas."""
        values = {name: value for name, value in asdict(self).items() if value is not None}
        if "lora_targets" in values:
            values["lora_targets"] = parse_lora_targets(str(values["lora_targets"]))
        return values

    def overrides(self) -> Overrides:
        """The validated :class:`autotune.planner.request.Overrides`.

        Raises:
            InvalidRequestError: a value out of range or not one of the choices, or a combination refused (one line
                naming the option).
        """
        return validated(Overrides, **self.given())


NOT_GIVEN = SettingOptions()
"""No setting option given: the default of a command's ``setting`` parameter (the decorator replaces it)."""


def parse_lora_targets(value: str) -> tuple[str, ...]:
    """'q_proj, v_proj' → ('q_proj', 'v_proj')."""
    return tuple(part.strip() for part in value.split(",") if part.strip())


SETTING_OPTION_NAMES: tuple[str, ...] = tuple(field.name for field in fields(SettingOptions))
"""The field names of :class:`SettingOptions`, in help order."""


def _stated_default(name: str) -> str:
    if name in GPU_DEPENDENT:
        return "by the GPUs"
    default = TrainingSetting.model_fields[name].default
    if isinstance(default, tuple):
        return ",".join(default)
    return str(default)


def _option_parameters(*, stated: bool, leave_out: frozenset[str]) -> list[inspect.Parameter]:
    """One keyword parameter per option, typed with its typer option (defaults shown as the setting's if ``stated``)."""
    hints = typing.get_type_hints(SettingOptions, include_extras=True)
    parameters = []
    for name in SETTING_OPTION_NAMES:
        if name in leave_out:
            continue
        annotation = hints[name]
        if stated or name in PLANNER_HELP:
            base, info = typing.get_args(annotation)
            info = copy(info)
            if stated:
                info.show_default = _stated_default(name)
            else:
                info.help = PLANNER_HELP[name]
            annotation = Annotated[base, info]
        parameters.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=annotation))
    return parameters


def takes_setting_options(
    *, stated: bool, leave_out: tuple[str, ...] = ()
) -> Callable[[CommandT], Callable[..., None]]:
    """Decorate a command whose ``setting: SettingOptions`` parameter stands for every setting option.

    Args:
        stated: the command evaluates one stated setting (``estimate``, ``trace``): its help shows the setting's
            defaults. Else the planner chooses what is not given (``plan``, ``sweep``).
        leave_out: options the command replaces by its own (``sweep``'s ``--methods`` for ``--method``).

    Returns:
        A decorator: the command's signature gets the options in place of ``setting``; the wrapper builds the
        :class:`SettingOptions` and calls the command with it.
    """
    left_out = frozenset(leave_out)

    def decorate(command: CommandT) -> Callable[..., None]:
        signature = inspect.signature(command)
        hints = typing.get_type_hints(command, include_extras=True)
        parameters = []
        for parameter in signature.parameters.values():
            if parameter.name == "setting":
                parameters += _option_parameters(stated=stated, leave_out=left_out)
            else:
                kind = inspect.Parameter.KEYWORD_ONLY
                parameters.append(parameter.replace(kind=kind, annotation=hints[parameter.name]))
        names = [name for name in SETTING_OPTION_NAMES if name not in left_out]

        @functools.wraps(command)
        def wrapper(**values: Any) -> None:
            setting = SettingOptions(**{name: values.pop(name) for name in names})
            command(setting=setting, **values)

        wrapper.__signature__ = signature.replace(parameters=parameters, return_annotation=None)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {parameter.name: parameter.annotation for parameter in parameters}
        return wrapper

    return decorate
