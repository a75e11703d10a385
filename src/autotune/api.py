"""autotune's Python API: the plan, estimate and launch specification the command line gives, as typed results.

For a notebook, a sweep script or a tool like SkyPilot that would otherwise shell out to ``autotune plan --json``::

    from autotune import plan, estimate, grid, launch_spec

    outcome = plan("llama3-8b", gpu="4090", seq_len=2048)            # = autotune plan llama3-8b --gpu 4090 ...
    outcome.plan_file.setting.method, outcome.plan_file.prediction.peak_memory_gib
    outcome.json_dict()                                               # = autotune plan ... --json
    estimate("llama3-8b", gpu="4090", method="qlora", micro_batch_size=2).estimate.tokens_per_s
    grid("llama3-8b", gpu=["4090", "h100"], num_gpus=[1, 8], objective="cost").report.chosen  # = --gpu 4090,h100 ...
    launch_spec(outcome.plan_file, dataset="train.jsonl", output_dir="runs/r1").spec.argv

Options are keyword arguments named as the command line's options with underscores: the request's groups
(:class:`autotune.session.planning.PlanOptions`: GPUs and nodes, workload, dataset, eval set, objective,
calibration) and the setting group (:class:`autotune.session.setting_options.SettingOptions`: ``method``,
``micro_batch_size``, ``grad_ckpt``, …), or the setting group whole as ``setting=SettingOptions(...)``. Every function
goes through the same session layer as the commands (:mod:`autotune.session`), so a result equals the command's.

Errors are the command line's: every refusal raises an :class:`autotune.errors.AutotuneError` subclass whose message
is the one line ``autotune`` prints (``InvalidRequestError`` for a bad option, ``InfeasibleError`` when nothing fits).
Nothing here imports torch; ``launch_spec`` builds what ``autotune launch --dry-run`` shows and writes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from autotune import __all__ as __all__  # the names autotune exports from here (PEP 562): one list
from autotune.errors import InvalidRequestError
from autotune.launcher import LaunchOptions, LaunchSpec
from autotune.launcher.checks import LaunchContext, run_checks
from autotune.schemas.plan import PlanFile
from autotune.schemas.plan_io import load_plan
from autotune.session.estimating import EstimateOutcome, estimate_one
from autotune.session.gpu_grid import GridOutcome, plan_table
from autotune.session.option_groups import GridOptions
from autotune.session.plan_one import PlanOutcome, plan_on_data, prepare
from autotune.session.planning import NOT_PLAN_PARAMS, PlanOptions
from autotune.session.resolve import catalog_gpu
from autotune.session.setting_options import SETTING_OPTION_NAMES, SettingOptions
from autotune.validation import format_validation_error

REQUEST_OPTION_NAMES = tuple(f.name for f in fields(PlanOptions) if f.name not in NOT_PLAN_PARAMS | {"model", "gpu"})
"""The keyword arguments of :func:`plan` and :func:`estimate` besides the setting's: :class:`PlanOptions`' fields."""


def request_options(model: str, gpu: str, given: dict[str, Any]) -> PlanOptions:
    """The request :func:`plan` / :func:`estimate` were given, as the session's one typed set of option groups.

    ``given``: keyword arguments, each a :class:`PlanOptions` field (``num_gpus``, ``seq_len``, ``dataset``, …), a
    :class:`SettingOptions` field (``method``, ``micro_batch_size``, …) or ``setting`` (a whole
    :class:`SettingOptions`; then no setting field may be given beside it).

    Raises:
        InvalidRequestError: an unknown keyword (the message lists the known ones), a GPU list (:func:`grid` plans
            several), or ``setting`` together with setting fields.
    """
    options = _grouped(model, gpu, given)
    if "," in gpu or gpu.strip().lower() == "any":
        raise InvalidRequestError(f"gpu {gpu!r}: plan takes one GPU type; grid(...) plans a table of several")
    return options


def _grouped(model: str, gpu: str, given: dict[str, Any]) -> PlanOptions:
    """``given`` sorted into :class:`PlanOptions` and its :class:`SettingOptions` (:func:`request_options`)."""
    values = dict(given)
    setting = values.pop("setting", None)
    setting_fields = {name: values.pop(name) for name in list(values) if name in SETTING_OPTION_NAMES}
    unknown = sorted(set(values) - set(REQUEST_OPTION_NAMES))
    if unknown:
        known = ", ".join([*REQUEST_OPTION_NAMES, *SETTING_OPTION_NAMES, "setting"])
        raise InvalidRequestError(f"unknown option {', '.join(unknown)}: the options are {known}")
    if setting is not None and setting_fields:
        raise InvalidRequestError(f"give setting=SettingOptions(...) or {', '.join(setting_fields)}, not both")
    if not isinstance(setting, SettingOptions | None):
        raise InvalidRequestError(f"setting must be a SettingOptions, not {type(setting).__name__}")
    return PlanOptions(model=model, gpu=gpu, setting=setting or SettingOptions(**setting_fields), **values)


def plan(model: str, gpu: str, **options: Any) -> PlanOutcome:
    """The best setting that fits ``model`` on ``gpu`` (``autotune plan MODEL --gpu GPU`` with ``options``).

    Args:
        model: a catalog name, a Hugging Face config.json or model directory, or a .gguf file.
        gpu: one GPU name or alias (``autotune gpus``).
        **options: see :func:`request_options` (e.g. ``num_gpus=8, seq_len=4096, method="lora"``).

    Returns:
        The plan file (``outcome.plan_file``: what ``-o`` writes), the search (``outcome.result``) and the notes;
        ``outcome.json_dict()`` is ``autotune plan --json``'s output.

    Raises:
        InvalidRequestError: a bad option (one line naming it).
        InfeasibleError: nothing fits (the nearest setting and why).
        AutotuneError: any other refusal of ``autotune plan``.
    """
    return plan_on_data(request_options(model, gpu, options))


def estimate(model: str, gpu: str, **options: Any) -> EstimateOutcome:
    """Peak memory and step time of one stated setting (``autotune estimate MODEL --gpu GPU`` with ``options``).

    Setting options not given take the setting's defaults (``autotune estimate --help``), not the planner's choice.

    Returns:
        The estimate (``outcome.estimate``), the setting and workload it priced, the dataset's layout and the notes;
        ``outcome.json_dict()`` is ``autotune estimate --json``'s output.

    Raises:
        InvalidRequestError: a bad option, or a sharding the GPUs cannot run (one line).
        AutotuneError: any other refusal of ``autotune estimate``.
    """
    return estimate_one(request_options(model, gpu, options))


def grid(
    model: str,
    gpu: str | Sequence[str] = "any",
    num_gpus: int | str | Sequence[int] = 1,
    *,
    deadline: str | None = None,
    budget: float | None = None,
    price: Mapping[str, float] | Sequence[str] | None = None,
    **options: Any,
) -> GridOutcome:
    """The best setting per GPU type × count and the one chosen (``autotune plan MODEL --gpu A,B --num-gpus 1,8``).

    Args:
        model: as :func:`plan`.
        gpu: GPU names or aliases (a list, or one comma-separated string), or ``"any"``: the current cards.
        num_gpus: GPUs per node, one count or several (a list, or ``"1,2,8"``).
        deadline: the longest acceptable run, e.g. ``"24h"`` (``--deadline``; needs ``num_samples`` or
            ``dataset_tokens``).
        budget: the most the run may cost, in the price table's currency (``--budget``).
        price: prices per GPU-hour that win over the price tables, ``{"h100": 2.49}`` or ``["h100=2.49"]``.
        **options: as :func:`plan`; ``objective`` may also be ``"time"`` or ``"cost"`` (the table's objectives).

    Returns:
        ``outcome.report`` (every row, the chosen one, the prices used, the notes) and ``outcome.plan_file`` (the chosen
        row's plan, what ``-o`` writes); ``outcome.json_dict()`` is the command's ``--json`` output.

    Raises:
        InvalidRequestError: a bad option, GPU count, deadline, budget or price (one line, before anything is planned).
        InfeasibleError: nothing fits anywhere, or no row meets the deadline / budget.
        AutotuneError: any other refusal of ``autotune plan``.
    """
    gpus = gpu if isinstance(gpu, str) else ",".join(gpu)
    counts = str(num_gpus) if isinstance(num_gpus, int | str) else ",".join(str(count) for count in num_gpus)
    prices = [f"{name}={value!r}" for name, value in price.items()] if isinstance(price, Mapping) else price
    prepared, _, _ = prepare(_grouped(model, gpus, options))
    return plan_table(prepared, counts, GridOptions(deadline=deadline, budget=budget, price=list(prices or []) or None))


@dataclass(frozen=True)
class LaunchPreview:
    """What ``autotune launch PLAN --dry-run`` shows: the command, environment and files, and the checks' warnings."""

    spec: LaunchSpec
    warnings: list[str]


def launch_spec(
    plan_file: PlanFile | str | Path, dataset: str, output_dir: str | Path, **options: Any
) -> LaunchPreview:
    """The launch of ``plan_file`` on ``dataset`` into ``output_dir``, checked as a dry run; nothing is written.

    Args:
        plan_file: a plan (``plan(...).plan_file``) or the path of a plan YAML.
        dataset: the training data (a local file or a hub dataset name).
        output_dir: the run directory the launch would create.
        **options: :class:`autotune.launcher.LaunchOptions` fields (``max_steps``, ``cpu``, ``eval_dataset``, …).

    Raises:
        InvalidRequestError: an unknown or invalid option (one line naming it).
        AutotuneError: what a dry run of ``autotune launch`` refuses (every launch check runs; the checks of this
            machine warn instead, as in a dry run).
    """
    plan_value = plan_file if isinstance(plan_file, PlanFile) else load_plan(Path(plan_file))
    local = Path(dataset).expanduser()
    values = {
        **options,
        "dataset": str(local.absolute()) if local.exists() else dataset,
        "output_dir": str(Path(output_dir).expanduser().absolute()),
    }
    try:
        launch_options = LaunchOptions.model_validate(values)
    except ValidationError as error:
        raise InvalidRequestError(format_validation_error(error, LaunchOptions)) from None
    context = run_checks(LaunchContext(plan=plan_value, options=launch_options, dry_run=True, resolve_gpu=catalog_gpu))
    assert context.spec is not None  # the plan-and-options check builds it or refuses
    return LaunchPreview(context.spec, context.warnings)
