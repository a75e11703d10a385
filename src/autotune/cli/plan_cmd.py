"""``autotune plan``: search every setting, print the best that fits, optionally write plan.yaml.

With several GPU types or counts (``--gpu 4090,h100 --num-gpus 1,8``, ``--gpu any``) or a time / money option
(``--objective time|cost``, ``--deadline``, ``--budget``, ``--price``), one table of the best setting per type × count
(:mod:`autotune.cli.gpu_grid`); otherwise the one plan, as before.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

from autotune.cli import options as opt
from autotune.cli.console import console
from autotune.cli.dataset_lengths import dataset_workload
from autotune.cli.dataset_plan import plan_prepared, with_eval_data
from autotune.cli.gpu_grid import single_count, wants_grid
from autotune.cli.planning import PlanOptions
from autotune.cli.render import print_json, render_plan
from autotune.cli.resolve import eval_data, warn_eval_is_training_data
from autotune.cli.setting_options import NOT_GIVEN, SettingOptions, takes_setting_options
from autotune.errors import InvalidRequestError
from autotune.schemas.dataset_stats import DEFAULT_MAX_ROWS
from autotune.schemas.setting import DEFAULT_SEQ_LEN

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
DeadlineOpt = Annotated[
    str | None, typer.Option("--deadline", help="Longest acceptable run, e.g. 12h, 90m, 2d (needs the run's size).")
]
BudgetOpt = Annotated[
    float | None, typer.Option("--budget", help="Most the run may cost, in the price table's currency (USD).")
]
PriceOpt = Annotated[
    list[str] | None,
    typer.Option("--price", help="GPU=PRICE per GPU-hour, e.g. h100=2.49; wins over the price tables. Repeatable."),
]


def plan_grid_command(
    options: PlanOptions,
    num_gpus: str,
    deadline: str | None,
    budget: float | None,
    price: list[str] | None,
    output: Path | None,
    json_: bool,
    started: float,
) -> None:
    """``plan`` over several GPU types × counts: validate, plan every cell, choose, print (and write with ``-o``)."""
    from autotune.cli.gpu_grid import grid_ask, render_grid, run_grid, write_grid

    ask = grid_ask(options, num_gpus, deadline, budget, price)
    report, plan_file = run_grid(options, ask)
    elapsed = time.perf_counter() - started
    table = write_grid(report, plan_file, output) if output is not None else None
    if json_:
        print_json(report.model_dump(mode="json"))
        return
    render_grid(report, elapsed)
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
    num_nodes: opt.NumNodesOpt = 1,
    host_memory_gib: opt.HostMemoryOpt = None,
    seq_len: opt.SeqLenOpt = DEFAULT_SEQ_LEN,
    global_batch_size: opt.GlobalBatchOpt = 32,
    objective: PlanObjectiveOpt = "quality",
    setting: SettingOptions = NOT_GIVEN,
    num_samples: opt.NumSamplesOpt = None,
    dataset_tokens: opt.DatasetTokensOpt = None,
    epochs: opt.EpochsOpt = 1.0,
    dataset: opt.PlanDatasetOpt = None,
    tokenizer: opt.TokenizerOpt = None,
    dataset_format: opt.PlanDatasetFormatOpt = "auto",
    max_rows: opt.MaxRowsOpt = DEFAULT_MAX_ROWS,
    packing: opt.PackingOpt = "auto",
    eval_dataset: opt.EvalDatasetOpt = None,
    eval_fraction: opt.EvalFractionOpt = None,
    eval_steps: opt.EvalStepsOpt = None,
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
    deadline: DeadlineOpt = None,
    budget: BudgetOpt = None,
    price: PriceOpt = None,
) -> None:
    """Find the best setting that fits MODEL on your GPUs; every option fixes one choice."""
    if plot is not None:
        from autotune.cli.plots import check_plot_path

        check_plot_path(plot)  # before anything is written
    started = time.perf_counter()
    options = PlanOptions(
        model=model,
        gpu=gpu,
        num_gpus=1,
        num_nodes=num_nodes,
        host_memory_gib=host_memory_gib,
        seq_len=seq_len,
        global_batch_size=global_batch_size,
        num_samples=num_samples,
        dataset_tokens=dataset_tokens,
        epochs=epochs,
        objective=objective,
        calibration=calibration,
        dataset=dataset,
        tokenizer=tokenizer,
        dataset_format=dataset_format,
        max_rows=max_rows,
        packing=packing,
        eval_dataset=eval_dataset,
        eval_fraction=eval_fraction,
        eval_steps=eval_steps,
        setting=setting,
    )
    eval_data(eval_dataset, eval_fraction, eval_steps)  # bad eval options refused before any tokenizing
    options, dataset_stats, dataset_notes = dataset_workload(options)
    options = with_eval_data(options, dataset_stats)
    warn_eval_is_training_data(dataset, eval_dataset)
    started = time.perf_counter()  # the search's time, not the tokenizing's (which prints its own)
    if wants_grid(gpu, num_gpus, objective, deadline, budget, price):
        if plot is not None or verify:
            raise InvalidRequestError(
                "--plot and --verify take one GPU type and count; plan the table first, then the chosen row alone"
            )
        plan_grid_command(options, num_gpus, deadline, budget, price, output, json_, started)
        return
    options = replace(options, num_gpus=single_count(num_gpus))
    plan_file, result, notes = plan_prepared(options, dataset_stats, dataset_notes)
    elapsed = time.perf_counter() - started
    if verify:
        from autotune.cli.plan_verify import verify_plan

        plan_file, result, verify_notes = verify_plan(options, plan_file, result)
        notes += verify_notes
    if output is not None:
        from autotune.schemas.plan_io import save_plan

        save_plan(plan_file, output)
    if plot is not None:
        from autotune.cli.plots import memory_breakdown_png

        bars = [(f"chosen: {plan_file.setting.short()}", plan_file.prediction)]
        bars += [(alt.setting.short(), alt.prediction) for alt in plan_file.alternatives]
        cluster = plan_file.cluster
        title = (
            f"{plan_file.model.key} on {cluster.world_size}× {cluster.gpu}, "
            f"seq_len {plan_file.workload.seq_len}: chosen setting and runner-ups"
        )
        memory_breakdown_png(bars, plot, title=title)
    if json_:
        data = plan_file.model_dump(mode="json")
        print_json(
            {
                "plan": {"setting": data["setting"], **data["prediction"]},
                "alternatives": [
                    {"setting": a["setting"], "why_not_chosen": a["why_not_chosen"], **a["prediction"]}
                    for a in data["alternatives"]
                ],
                "rejected": data["rejected"],
                "notes": notes,
                "searched": result.searched,
                "plan_file": data,
            }
        )
        return
    render_plan(plan_file, notes, result.searched, elapsed)
    if output is not None:
        import shlex

        console().print(f"[green]wrote[/] {output}; run it with:")
        data_arg = shlex.quote(plan_file.dataset.fingerprint.path) if plan_file.dataset is not None else "DATA"
        console().print(
            f"  autotune launch {shlex.quote(str(output))} --dataset {data_arg} --output-dir RUN",
            soft_wrap=True,
            markup=False,
        )
    if plot is not None:
        console().print(f"[green]wrote[/] {plot}")
