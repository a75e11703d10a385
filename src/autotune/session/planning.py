"""Helpers shared by the planning commands (``plan``, ``sweep``, ``launch MODEL``): options → request → plan.

The options themselves are declared once, as the parameters of ``autotune plan`` (:mod:`autotune.cli.plan_cmd`);
``launch MODEL [plan options]`` parses them with that same command, found through click's context
(:func:`parse_plan_args`), so no command module imports another.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from autotune.costmodel.calibration import default_coefficients
from autotune.errors import InvalidRequestError
from autotune.planner.build import build_plan_file
from autotune.planner.request import ADAPTER_ONLY_FIELDS, PlanRequest
from autotune.planner.search import PlanResult, search
from autotune.schemas.dataset_stats import DEFAULT_MAX_ROWS, DatasetStats
from autotune.schemas.objective import TABLE_OBJECTIVES
from autotune.schemas.plan import PlanFile
from autotune.schemas.setting import DEFAULT_SEQ_LEN
from autotune.schemas.workload import Batches, Workload
from autotune.session.calibration_choice import coefficients_from_option, stack_note
from autotune.session.option_groups import (
    DEFAULT_NODES,
    DEFAULT_SIZE,
    NO_DATASET,
    NO_EVAL,
    DatasetOptions,
    EvalOptions,
    NodeOptions,
    SizeOptions,
)
from autotune.session.resolve import (
    build_request,
    eval_data,
    setting_notes,
)
from autotune.session.setting_options import SETTING_OPTION_NAMES, SettingOptions

DEFAULT_GLOBAL_BATCH_SIZE: int = Workload.model_fields["global_batch_size"].default
"""The global batch planned when ``--global-batch-size`` is not given (the workload schema's default)."""


@dataclass(frozen=True)
class PlanOptions:
    """What ``plan`` (and ``sweep`` per cell, ``launch MODEL``) is asked: model, GPUs, workload, objective, setting.

    Values as given on the command line; :func:`request_from_options` validates them into a :class:`PlanRequest`.
    """

    model: str
    gpu: str
    num_gpus: int = 1
    num_nodes: int = 1
    host_memory_gib: float | None = None
    interconnect: str | None = None
    seq_len: int = DEFAULT_SEQ_LEN
    global_batch_size: int | None = None
    """``--global-batch-size``; None: not given, :data:`DEFAULT_GLOBAL_BATCH_SIZE`, which the planner may lower where
    nothing fits at it (``PlanRequest.global_batch_stated``)."""
    num_samples: int | None = None
    dataset_tokens: int | None = None
    epochs: float = 1.0
    objective: str = "quality"
    calibration: Path | None = None
    dataset: str | None = None
    tokenizer: str | None = None
    dataset_format: str = "auto"
    max_rows: int = DEFAULT_MAX_ROWS
    packing: str = "auto"
    eval_dataset: str | None = None
    eval_fraction: float | None = None
    eval_steps: int | None = None
    setting: SettingOptions = field(default_factory=SettingOptions)
    batches: Batches | None = None
    """How ``dataset``'s sequences are batched (``dataset_lengths.with_packing``: packed blocks or padded examples,
    ``num_samples`` its sequences), not a command-line value; None without a dataset."""
    dataset_rows: int | None = None
    """Rows of ``dataset`` (what ``--eval-fraction`` holds a share of), not a command-line value."""
    eval_stats: DatasetStats | None = None
    """``eval_dataset`` tokenized (``dataset_plan.eval_dataset_stats``), not a command-line value."""

    @classmethod
    def from_groups(
        cls,
        *,
        nodes: NodeOptions = DEFAULT_NODES,
        size: SizeOptions = DEFAULT_SIZE,
        data: DatasetOptions = NO_DATASET,
        evaluation: EvalOptions = NO_EVAL,
        **values: Any,
    ) -> PlanOptions:
        """The request from its option groups (nodes, size, dataset, eval set) and the other fields by name."""
        groups = {**nodes.values(), **size.values(), **data.values(), **evaluation.values()}
        return cls(**groups, **values)

    def with_method(self, method: str, seq_len: int) -> PlanOptions:
        """These options with ``method`` forced and ``seq_len`` (one cell of ``sweep``).

        The adapter options (:data:`autotune.planner.request.ADAPTER_ONLY_FIELDS`) apply to the adapter methods' cells
        and are left out of a full fine-tune's.
        """
        setting = replace(self.setting, method=method)
        if method == "full":
            setting = replace(setting, **dict.fromkeys(ADAPTER_ONLY_FIELDS))
        return replace(self, seq_len=seq_len, setting=setting)


def request_from_options(options: PlanOptions) -> tuple[PlanRequest, list[str]]:
    """Build a validated PlanRequest from ``plan``'s options (also used by ``sweep`` and ``launch MODEL``).

    Raises:
        AutotuneError: unknown model or GPU, or an invalid option (one line naming it).
    """
    coefficients, calibration_name = coefficients_from_option(options.calibration)
    return build_request(
        model=options.model,
        gpu=options.gpu,
        num_gpus=options.num_gpus,
        num_nodes=options.num_nodes,
        host_memory_gib=options.host_memory_gib,
        interconnect=options.interconnect,
        seq_len=options.seq_len,
        global_batch_size=DEFAULT_GLOBAL_BATCH_SIZE if options.global_batch_size is None else options.global_batch_size,
        global_batch_stated=options.global_batch_size is not None,
        num_samples=options.num_samples,
        dataset_tokens=options.dataset_tokens,
        epochs=options.epochs,
        batches=options.batches,
        evaluation=eval_data(options.eval_dataset, options.eval_fraction, options.eval_steps),
        eval_steps=options.eval_steps,
        dataset_rows=options.dataset_rows,
        eval_stats=options.eval_stats,
        objective=options.objective,
        overrides=options.setting.overrides(),
        coefficients=coefficients,
        calibration_name=calibration_name,
    )


def plan_from_options(options: PlanOptions) -> tuple[PlanFile, PlanResult, list[str]]:
    """Plan from ``plan``'s options: returns the plan file, the search result and notes for the user."""
    request, notes = request_from_options(options)
    result = search(request)
    evaluation = eval_data(options.eval_dataset, options.eval_fraction, options.eval_steps)
    plan_file = build_plan_file(request, result).model_copy(update={"eval_data": evaluation})
    notes += result.notes
    settings = [plan_file.setting, *(alt.setting for alt in plan_file.alternatives)]
    coefficients = request.coefficients or default_coefficients()
    notes += setting_notes(
        request.model, request.cluster, plan_file.workload, plan_file.setting, coefficients,
        plan_file.prediction.step_time_s, options.host_memory_gib, settings,
    )  # fmt: skip
    speed = stack_note(request.coefficients)
    if speed is not None:
        notes.append(speed)
    return plan_file, result, notes


NOT_PLAN_PARAMS = frozenset({"setting", "batches", "dataset_rows", "eval_stats"})
"""Fields of :class:`PlanOptions` that are not ``plan`` parameters (derived from them)."""

PLAN_OPTION_NAMES = tuple(option.name for option in fields(PlanOptions) if option.name not in NOT_PLAN_PARAMS)
"""The fields of :class:`PlanOptions` that are ``plan`` parameters of the same name."""

PLAN_OUTPUT_PARAMS = frozenset({"output", "json_", "plot", "verify"})
"""``plan`` parameters that choose what to print or write, not what to plan."""

PLAN_TABLE_PARAMS = {"deadline": "--deadline", "budget": "--budget", "price": "--price"}
"""``plan`` parameters of the GPU type × count table only (:mod:`autotune.session.gpu_grid`)."""


def parse_plan_args(plan_command: Any, model: str, args: list[str]) -> PlanOptions:
    """Parse ``[MODEL, *args]`` with ``plan_command`` (the click command of ``autotune plan``).

    The command's callback is not run: its parsed parameters are turned into :class:`PlanOptions` by
    :func:`plan_options_from_params`.

    Raises:
        click.UsageError: unknown or malformed options (rendered as one line by the CLI).
        InvalidRequestError: an output option of ``plan`` (``-o``, ``--json``, ``--plot``).
    """
    context = plan_command.make_context("autotune launch", [model, *args])
    given = [name for name in PLAN_OUTPUT_PARAMS if context.params.get(name) not in (None, False)]
    if given:
        raise InvalidRequestError(
            f"{', '.join(sorted(given))}: output options of 'autotune plan' do not apply to launch; "
            "run 'autotune plan ... -o plan.yaml' first"
        )
    return plan_options_from_params(context.params)


def plan_options_from_params(params: dict[str, Any]) -> PlanOptions:
    """:class:`PlanOptions` from the parsed parameters of ``autotune plan`` (click's ``ctx.params``, by field name).

    Raises:
        InvalidRequestError: a list of GPUs or counts, ``any``, or an option of the table (``--deadline``,
            ``--budget``, ``--price``, ``--objective time|cost``): one plan runs one GPU type and count.
    """
    table = [flag for name, flag in PLAN_TABLE_PARAMS.items() if params.get(name)]
    if params.get("objective") in TABLE_OBJECTIVES:
        table.append(f"--objective {params['objective']}")
    gpu, num_gpus = str(params.get("gpu", "")), str(params.get("num_gpus", "1"))
    if "," in gpu or "," in num_gpus or gpu.strip().lower() == "any":
        table.append("a list of GPUs or counts")
    if table:
        raise InvalidRequestError(
            f"{', '.join(table)}: launch runs one GPU type and count; choose it with "
            "'autotune plan ... -o plan.yaml' first"
        )
    setting = SettingOptions(**{name: params[name] for name in SETTING_OPTION_NAMES})
    plan = {name: params[name] for name in PLAN_OPTION_NAMES if name in params}
    if isinstance(plan.get("num_gpus"), str):
        try:
            plan["num_gpus"] = int(plan["num_gpus"])
        except ValueError:
            raise InvalidRequestError(f"--num-gpus {plan['num_gpus']!r}: give a whole number of GPUs") from None
    return PlanOptions(setting=setting, **plan)
