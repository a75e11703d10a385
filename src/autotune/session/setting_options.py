"""The setting options of a request: one typed group, one field per option (:class:`SettingOptions`).

The group is the one declaration of these options for every front end. Each field carries its command-line spelling
and help as :class:`Flag` metadata; the command line turns the fields into typer options
(:func:`autotune.cli.setting_options.takes_setting_options`), and the Python API takes the same fields as keyword
arguments (:mod:`autotune.api`). Every option defaults to None (not given): the planner chooses it, or a stated
setting takes the default of :class:`autotune.schemas.setting.TrainingSetting`. The values are validated once, by
:class:`autotune.planner.request.Overrides` (:meth:`SettingOptions.overrides`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Annotated

from autotune.planner.request import Overrides
from autotune.schemas.setting import DESCRIPTIONS
from autotune.session.resolve import validated


@dataclass(frozen=True)
class Flag:
    """How an option group's field is spelled on the command line: its flag declaration and help text.

    ``decls`` is click's declaration (``--method``, or ``--grad-ckpt/--no-grad-ckpt`` for an on/off pair).
    """

    decls: str
    help: str
    min: int | None = None
    """The least value a number option takes (click refuses less in one line), or None."""
    max: int | None = None
    """The largest value a number option takes, or None."""
    metavar: str | None = None
    """The value's name in the help (``K``), or None for its type's."""
    show_default: bool = True
    """Whether the help shows the default (False where the help text already says it)."""


@dataclass(frozen=True)
class SettingOptions:
    """The setting options as given on the command line; None = not given.

    Types are the command line's (names as strings, ``lora_targets`` as ``'q_proj,v_proj'``); :meth:`overrides`
    turns them into the validated :class:`autotune.planner.request.Overrides`.
    """

    method: Annotated[str | None, Flag("--method", DESCRIPTIONS["method"])] = None
    micro_batch_size: Annotated[int | None, Flag("--micro-batch-size", DESCRIPTIONS["micro_batch_size"])] = None
    grad_accum: Annotated[int | None, Flag("--grad-accum", DESCRIPTIONS["grad_accum"])] = None
    grad_ckpt: Annotated[bool | None, Flag("--grad-ckpt/--no-grad-ckpt", DESCRIPTIONS["grad_ckpt"])] = None
    compile: Annotated[bool | None, Flag("--compile/--no-compile", DESCRIPTIONS["compile"])] = None
    sharding: Annotated[str | None, Flag("--sharding", DESCRIPTIONS["sharding"])] = None
    optimizer: Annotated[str | None, Flag("--optimizer", DESCRIPTIONS["optimizer"])] = None
    precision: Annotated[str | None, Flag("--precision", DESCRIPTIONS["precision"])] = None
    lora_rank: Annotated[int | None, Flag("--lora-rank", DESCRIPTIONS["lora_rank"])] = None
    lora_alpha: Annotated[float | None, Flag("--lora-alpha", DESCRIPTIONS["lora_alpha"])] = None
    lora_dropout: Annotated[float | None, Flag("--lora-dropout", DESCRIPTIONS["lora_dropout"])] = None
    adapter_dtype: Annotated[str | None, Flag("--adapter-dtype", DESCRIPTIONS["adapter_dtype"])] = None
    kernels: Annotated[str | None, Flag("--kernels", DESCRIPTIONS["kernels"])] = None
    lora_targets: Annotated[str | None, Flag("--lora-targets", DESCRIPTIONS["lora_targets"])] = None
    loss_impl: Annotated[str | None, Flag("--loss-impl", DESCRIPTIONS["loss_impl"])] = None
    grad_sync: Annotated[str | None, Flag("--grad-sync", DESCRIPTIONS["grad_sync"])] = None
    attention_impl: Annotated[str | None, Flag("--attention-impl", DESCRIPTIONS["attention_impl"])] = None
    optimizer_in_backward: Annotated[
        bool | None,
        Flag("--optimizer-in-backward/--no-optimizer-in-backward", DESCRIPTIONS["optimizer_in_backward"]),
    ] = None
    fp8: Annotated[bool | None, Flag("--fp8/--no-fp8", DESCRIPTIONS["fp8"])] = None
    bf16_stochastic_rounding: Annotated[
        bool | None,
        Flag("--bf16-stochastic-rounding/--no-bf16-stochastic-rounding", DESCRIPTIONS["bf16_stochastic_rounding"]),
    ] = None
    activation_offloading: Annotated[
        bool | None,
        Flag("--activation-offloading/--no-activation-offloading", DESCRIPTIONS["activation_offloading"]),
    ] = None

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
