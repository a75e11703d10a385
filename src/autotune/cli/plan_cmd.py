"""``autotune plan``: search every setting, print the best that fits, optionally write plan.yaml."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from autotune.cli import options as opt
from autotune.cli.console import console
from autotune.cli.planning import PlanOptions, plan_from_options
from autotune.cli.render import print_json, render_plan
from autotune.cli.setting_options import NOT_GIVEN, SettingOptions, takes_setting_options
from autotune.schemas.setting import DEFAULT_SEQ_LEN


@takes_setting_options(stated=False)
def plan_command(
    model: opt.ModelArg,
    gpu: opt.GpuOpt,
    num_gpus: opt.NumGpusOpt = 1,
    num_nodes: opt.NumNodesOpt = 1,
    host_memory_gib: opt.HostMemoryOpt = None,
    seq_len: opt.SeqLenOpt = DEFAULT_SEQ_LEN,
    global_batch_size: opt.GlobalBatchOpt = 32,
    objective: opt.ObjectiveOpt = "quality",
    setting: SettingOptions = NOT_GIVEN,
    num_samples: opt.NumSamplesOpt = None,
    dataset_tokens: opt.DatasetTokensOpt = None,
    epochs: opt.EpochsOpt = 1.0,
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
) -> None:
    """Find the best setting that fits MODEL on your GPUs; every option fixes one choice."""
    if plot is not None:
        from autotune.cli.plots import check_plot_path

        check_plot_path(plot)  # before anything is written
    started = time.perf_counter()
    options = PlanOptions(
        model=model,
        gpu=gpu,
        num_gpus=num_gpus,
        num_nodes=num_nodes,
        host_memory_gib=host_memory_gib,
        seq_len=seq_len,
        global_batch_size=global_batch_size,
        num_samples=num_samples,
        dataset_tokens=dataset_tokens,
        epochs=epochs,
        objective=objective,
        calibration=calibration,
        setting=setting,
    )
    plan_file, result, notes = plan_from_options(options)
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
        console().print(
            f"  autotune launch {shlex.quote(str(output))} --dataset DATA --output-dir RUN",
            soft_wrap=True,
            markup=False,
        )
    if plot is not None:
        console().print(f"[green]wrote[/] {plot}")
