"""The setting options of ``plan``, ``estimate``, ``trace`` and ``sweep`` on the command line: one typed group.

:class:`autotune.session.setting_options.SettingOptions` is the one declaration: a field per setting option, with its
flag and help (:class:`autotune.session.setting_options.Flag`, help from the schemas' field descriptions). A
command takes them all as one parameter, ``setting: SettingOptions``, and is decorated with
:func:`takes_setting_options`, which puts one typer option per field into the command's signature (what typer reads)
and hands the command one :class:`SettingOptions` built from them.

Every option defaults to None (not given): ``plan`` and ``sweep`` let the planner choose it, ``estimate`` and ``trace``
take the setting's default (:class:`autotune.schemas.setting.TrainingSetting`), shown in their help. Either way the
values are validated once, by :class:`autotune.planner.request.Overrides` (:meth:`SettingOptions.overrides`).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer
from pydantic import BaseModel

from autotune.planner.space import LOSS_IMPLEMENTATIONS
from autotune.schemas.setting import TrainingSetting, loss_impl_description
from autotune.schemas.trainer_options import option_flag
from autotune.session.option_groups import OptionGroup
from autotune.session.setting_options import SETTING_OPTION_NAMES, Flag, SettingOptions

CommandT = TypeVar("CommandT", bound=Callable[..., None])

PLANNER_HELP = {"loss_impl": loss_impl_description(LOSS_IMPLEMENTATIONS)}
"""Help of ``plan`` and ``sweep`` where the planner accepts fewer values than a stated setting (``native`` describes
other trainers' losses: ``estimate`` and ``trace`` price it, the planner refuses it)."""

GPU_DEPENDENT = frozenset({"sharding", "precision"})
"""Options whose stated default depends on the cluster (:func:`autotune.schemas.setting.default_sharding`,
:func:`autotune.schemas.setting.default_precision`)."""


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
        base, flag = typing.get_args(hints[name])
        assert isinstance(flag, Flag)
        info = typer.Option(flag.decls, help=flag.help)
        if stated:
            info.show_default = _stated_default(name)
        elif name in PLANNER_HELP:
            info.help = PLANNER_HELP[name]
        annotation = Annotated[base, info]  # type: ignore[valid-type]
        parameters.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=annotation))
    return parameters


def _group_parameters(group: type[OptionGroup]) -> list[inspect.Parameter]:
    """One keyword parameter per field of ``group``, typed with the typer option its :class:`Flag` describes."""
    hints = typing.get_type_hints(group, include_extras=True)
    parameters = []
    for field in dataclasses.fields(group):
        base, flag = typing.get_args(hints[field.name])
        assert isinstance(flag, Flag)
        option = typer.Option(
            flag.decls, help=flag.help, min=flag.min, max=flag.max, metavar=flag.metavar, show_default=flag.show_default
        )
        annotation = Annotated[base, option]  # type: ignore[valid-type]
        parameters.append(
            inspect.Parameter(field.name, inspect.Parameter.KEYWORD_ONLY, default=field.default, annotation=annotation)
        )
    return parameters


def schema_group(
    model: type[BaseModel], names: tuple[str, ...], describe: Callable[[str], str], stated: tuple[str, ...] = ()
) -> type[OptionGroup]:
    """An option group of ``model``'s fields ``names``, declared by the schema itself (no second list of options).

    Each field becomes ``--field-name`` (:func:`autotune.schemas.trainer_options.option_flag`) with help
    ``describe(name)``; its type is the field's (a ``Literal`` is read as text: the schema validates the choice); its
    default is the field's for an on/off switch and for the fields in ``stated``, and None (not given) otherwise,
    so that the schema's own default, and its record of what was given, apply when the group's values reach it
    (:meth:`autotune.session.option_groups.OptionGroup.given`).
    """
    fields: list[tuple[str, Any, Any]] = []
    for name in names:
        info = model.model_fields[name]
        annotation: Any = info.annotation
        if typing.get_origin(annotation) is typing.Literal:
            annotation = str | None
        elif annotation is not bool and type(None) not in typing.get_args(annotation):
            annotation = annotation | None
        default = info.get_default() if annotation is bool or name in stated else None
        if name in stated:
            annotation = type(default)
        flag = Flag(option_flag(name), describe(name), show_default=name not in stated)
        fields.append((name, Annotated[annotation, flag], dataclasses.field(default=default)))
    group = dataclasses.make_dataclass(f"{model.__name__}Group", fields, bases=(OptionGroup,), frozen=True)
    return typing.cast("type[OptionGroup]", group)


def _option_group(hint: object) -> type[OptionGroup] | None:
    """The option group a parameter's type names, or None (a plain option).

    ``Group``, or ``Annotated[OptionGroup, Group]`` for a group built at run time (:func:`schema_group`).
    """
    candidates = [hint, *typing.get_args(hint)[1:]] if typing.get_origin(hint) is Annotated else [hint]
    for candidate in candidates:
        if isinstance(candidate, type) and issubclass(candidate, OptionGroup) and candidate is not OptionGroup:
            return candidate
    return None


def takes_option_groups(
    *, stated: bool = False, leave_out: tuple[str, ...] = ()
) -> Callable[[CommandT], Callable[..., None]]:
    """Decorate a command whose group parameters (``setting: SettingOptions``, ``size: SizeOptions``…) are options.

    Each parameter typed with an option group (:class:`autotune.session.option_groups.OptionGroup`, or
    :class:`SettingOptions` named ``setting``) becomes one typer option per field of the group, in its place in the
    signature; the wrapper builds the groups back and calls the command with them.

    Args:
        stated: the command evaluates one stated setting (``estimate``, ``trace``): its help shows the setting's
            defaults. Else the planner chooses what is not given (``plan``, ``sweep``).
        leave_out: setting options the command replaces by its own (``sweep``'s ``--methods`` for ``--method``).

    Returns:
        A decorator: the command's signature gets the options in place of the groups.
    """
    left_out = frozenset(leave_out)

    def decorate(command: CommandT) -> Callable[..., None]:
        signature = inspect.signature(command)
        hints = typing.get_type_hints(command, include_extras=True)
        parameters: list[inspect.Parameter] = []
        groups: dict[str, tuple[type[Any], list[str]]] = {}
        for parameter in signature.parameters.values():
            group = _option_group(hints[parameter.name])
            if parameter.name == "setting":
                expanded = _option_parameters(stated=stated, leave_out=left_out)
                groups["setting"] = (SettingOptions, [p.name for p in expanded])
            elif group is not None:
                expanded = _group_parameters(group)
                groups[parameter.name] = (group, [p.name for p in expanded])
            else:
                kind = inspect.Parameter.KEYWORD_ONLY
                expanded = [parameter.replace(kind=kind, annotation=hints[parameter.name])]
            parameters += expanded

        @functools.wraps(command)
        def wrapper(**values: Any) -> None:
            built = {name: group(**{f: values.pop(f) for f in names}) for name, (group, names) in groups.items()}
            command(**built, **values)

        wrapper.__signature__ = signature.replace(parameters=parameters, return_annotation=None)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {parameter.name: parameter.annotation for parameter in parameters}
        return wrapper

    return decorate


def takes_setting_options(
    *, stated: bool, leave_out: tuple[str, ...] = ()
) -> Callable[[CommandT], Callable[..., None]]:
    """:func:`takes_option_groups` for a command with a ``setting: SettingOptions`` parameter (and maybe groups)."""
    return takes_option_groups(stated=stated, leave_out=leave_out)
