"""``autotune plan``: search every setting, print the best that fits, optionally write plan.yaml.

With several GPU types or counts (``--gpu 4090,h100 --num-gpus 1,8``, ``--gpu any``) or a time / money option
(``--objective time|cost``, ``--deadline``, ``--budget``, ``--price``), one table of the best setting per type × count
(:mod:`autotune.session.gpu_grid`, printed by :mod:`autotune.cli.gpu_grid`); otherwise the one plan, as before.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

from autotune.cli import options as opt
from autotune.cli.console import console, warn_eval_is_training_data
from autotune.cli.gpu_grid import single_count, wants_grid
from autotune.cli.render import print_json, render_plan
from autotune.cli.setting_options import takes_setting_options
from autotune.errors import InvalidRequestError
from autotune.planner.search import PlanResult
from autotune.schemas.plan import PlanFile
from autotune.schemas.setting import DEFAULT_SEQ_LEN
from autotune.session.option_groups import (
    DEFAULT_NODES,
    DEFAULT_SIZE,
    NO_DATASET,
    NO_EVAL,
    NO_GRID,
    DatasetOptions,
    EvalOptions,
    GridOptions,
    NodeOptions,
    SizeOptions,
)
from autotune.session.plan_one import PlanOutcome, plan_prepared, prepare
from autotune.session.planning import PlanOptions
from autotune.session.setting_options import NOT_GIVEN, SettingOptions

GpuListOpt = Annotated[
    str,
    typer.Option(
        "--gpu",
        help="GPU name or alias (autotune gpus), e.g. 4090, a100, h100; a comma list (4090,a100-80gb,h100) or 'any' "
        "(the current datacenter and workstation cards) plans each and prints one table.",
    ),
]
NumGpusListOpt = Annotated[str, typer.Option("--num-gpus", help="GPUs per node; a comma list (1,2,4,8) plans each.")]
PlanObjectiveOpt = Annotated[
    str,
    typer.Option(
        "--objective",
        help="quality (full > LoRA > QLoRA, then fastest), speed, or memory; across GPU types and counts also "
        "time (shortest run) or cost (cheapest run).",
    ),
]


def plan_grid_command(
    options: PlanOptions,
    num_gpus: str,
    table_options: GridOptions,
    output: Path | None,
    json_: bool,
    started: float,
    one_plan_only: bool = False,
) -> None:
    """``plan`` over several GPU types × counts: validate, plan every cell, choose, print (and write with ``-o``).

    Raises:
        InvalidRequestError: ``one_plan_only`` (``--plot`` or ``--verify`` given: they take one GPU type and count),
            or what the table's options refuse.
    """
    if one_plan_only:
        raise InvalidRequestError(
            "--plot and --verify take one GPU type and count; plan the table first, then the chosen row alone"
        )
    from autotune.cli.gpu_grid import render_grid, write_grid
    from autotune.session.gpu_grid import plan_table

    outcome = plan_table(options, num_gpus, table_options)
    elapsed = time.perf_counter() - started
    table = write_grid(outcome.report, outcome.plan_file, output) if output is not None else None
    if json_:
        print_json(outcome.json_dict())
        return
    render_grid(outcome.report, elapsed)
    if output is not None:
        import shlex

        console().print(f"[green]wrote[/] {output} (the chosen row) and {table} (the table); run it with:")
        console().print(
            f"  autotune launch {shlex.quote(str(output))} --dataset DATA --output-dir RUN",
            soft_wrap=True,
            markup=False,
        )


@takes_setting_options(stated=False)
def plan_command(
    model: opt.ModelArg,
    gpu: GpuListOpt,
    num_gpus: NumGpusListOpt = "1",
    nodes: NodeOptions = DEFAULT_NODES,
    seq_len: opt.SeqLenOpt = DEFAULT_SEQ_LEN,
    global_batch_size: opt.PlanGlobalBatchOpt = None,
    objective: PlanObjectiveOpt = "quality",
    setting: SettingOptions = NOT_GIVEN,
    size: SizeOptions = DEFAULT_SIZE,
    data: DatasetOptions = NO_DATASET,
    evaluation: EvalOptions = NO_EVAL,
    calibration: opt.CalibrationOpt = None,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Write the plan YAML here.")] = None,
    plot: Annotated[
        Path | None,
        typer.Option("--plot", help="Also draw the memory of the chosen setting and runner-ups to this PNG."),
    ] = None,
    verify: Annotated[
        bool,
        typer.Option(
            "--verify", help="Trace the chosen setting and each method's runner-up (needs torch); re-plan on a miss."
        ),
    ] = False,
    json_: opt.JsonOpt = False,
    table: GridOptions = NO_GRID,
) -> None:
    """Find the best setting that fits MODEL on your GPUs; every option fixes one choice."""
    grid = wants_grid(gpu, num_gpus, objective, table.deadline, table.budget, table.price)
    check_outputs(output, plot, grid)
    warn_eval_is_training_data(data.dataset, evaluation.eval_dataset)
    options = PlanOptions.from_groups(
        model=model, gpu=gpu, num_gpus=1, nodes=nodes, size=size, data=data, evaluation=evaluation, setting=setting,
        seq_len=seq_len, global_batch_size=global_batch_size, objective=objective, calibration=calibration,
    )  # fmt: skip
    options, dataset_stats, dataset_notes = prepare(options)
    started = time.perf_counter()  # the search's time, not the tokenizing's (which prints its own)
    if grid:
        plan_grid_command(options, num_gpus, table, output, json_, started, one_plan_only=plot is not None or verify)
        return
    options = replace(options, num_gpus=single_count(num_gpus))
    outcome = plan_prepared(options, dataset_stats, dataset_notes)
    elapsed = time.perf_counter() - started
    plan_file, result, notes = verified(options, outcome) if verify else outcome.astuple()
    if output is not None:
        from autotune.schemas.plan_io import save_plan

        save_plan(plan_file, output)
    if plot is not None:
        plot_plan(plan_file, plot)
    if json_:
        print_json(PlanOutcome(plan_file, result, notes).json_dict())
        return
    render_plan(plan_file, notes, result.searched, elapsed)
    if output is not None:
        print_launch_hint(plan_file, output)
    if plot is not None:
        console().print(f"[green]wrote[/] {plot}")


def check_outputs(output: Path | None, plot: Path | None, grid: bool) -> None:
    """Refuse, before any work, what could not be written.

    A ``--plot`` path ``check_plot_path`` refuses; an existing ``-o`` file (and for a table, the table file beside it:
    ``table_path``).

    Raises:
        InvalidRequestError: one of them.
    """
    if plot is not None:
        from autotune.cli.plots import check_plot_path

        check_plot_path(plot)
    if output is not None:
        from autotune.cli.gpu_grid import table_path
        from autotune.fileio import refuse_existing

        refuse_existing(output, *([table_path(output)] if grid else []))


def verified(options: PlanOptions, outcome: PlanOutcome) -> tuple[PlanFile, PlanResult, list[str]]:
    """``--verify``: the plan re-checked by tracing its setting and runner-ups (re-planned on a miss), with notes."""
    from autotune.cli.plan_verify import verify_plan

    plan_file, result, verify_notes = verify_plan(options, outcome.plan_file, outcome.result)
    return plan_file, result, outcome.notes + verify_notes


def plot_plan(plan_file: PlanFile, plot: Path) -> None:
    """``--plot``: the memory of the chosen setting and its runner-ups, as bars, to ``plot``."""
    from autotune.cli.plots import memory_breakdown_png

    bars = [(f"chosen: {plan_file.setting.short()}", plan_file.prediction)]
    bars += [(alt.setting.short(), alt.prediction) for alt in plan_file.alternatives]
    cluster = plan_file.cluster
    title = (
        f"{plan_file.model.key} on {cluster.world_size}× {cluster.gpu}, "
        f"seq_len {plan_file.workload.seq_len}: chosen setting and runner-ups"
    )
    memory_breakdown_png(bars, plot, title=title)


def print_launch_hint(plan_file: PlanFile, output: Path) -> None:
    """'wrote OUTPUT; run it with: autotune launch OUTPUT --dataset DATA --output-dir RUN' (the plan's dataset)."""
    import shlex

    console().print(f"[green]wrote[/] {output}; run it with:")
    data_arg = shlex.quote(plan_file.dataset.fingerprint.path) if plan_file.dataset is not None else "DATA"
    console().print(
        f"  autotune launch {shlex.quote(str(output))} --dataset {data_arg} --output-dir RUN",
        soft_wrap=True,
        markup=False,
    )
