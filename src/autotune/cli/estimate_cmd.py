"""``autotune estimate``: predict memory and time for one fixed setting (no search)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from autotune.cli import options as opt
from autotune.cli.console import console, warn_eval_is_training_data
from autotune.cli.render import dataset_table, print_json, render_estimate
from autotune.cli.setting_options import takes_setting_options
from autotune.cli.tracing import render_predicted_vs_traced, render_trace, require_torch, run_trace
from autotune.schemas.setting import DEFAULT_SEQ_LEN
from autotune.session.estimating import estimate_one
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
from autotune.session.planning import PlanOptions
from autotune.session.setting_options import NOT_GIVEN, SettingOptions


@takes_setting_options(stated=True)
def estimate_command(
    model: opt.ModelArg,
    gpu: opt.GpuOpt,
    num_gpus: opt.NumGpusOpt = 1,
    nodes: NodeOptions = DEFAULT_NODES,
    seq_len: opt.SeqLenOpt = DEFAULT_SEQ_LEN,
    setting: SettingOptions = NOT_GIVEN,
    size: SizeOptions = DEFAULT_SIZE,
    data: DatasetOptions = NO_DATASET,
    evaluation: EvalOptions = NO_EVAL,
    calibration: opt.CalibrationOpt = None,
    plot: Annotated[
        Path | None, typer.Option("--plot", help="Also draw the memory breakdown to this PNG (needs matplotlib).")
    ] = None,
    trace: Annotated[
        bool, typer.Option("--trace", help="Also trace the real training step on fake tensors (needs torch).")
    ] = False,
    json_: opt.JsonOpt = False,
) -> None:
    """Predict peak memory per GPU and step time for one setting."""
    if plot is not None:
        from autotune.cli.plots import check_plot_path

        check_plot_path(plot)  # fail before any work
    if trace:
        require_torch()
    warn_eval_is_training_data(data.dataset, evaluation.eval_dataset)
    options = PlanOptions.from_groups(
        model=model, gpu=gpu, num_gpus=num_gpus, nodes=nodes, size=size, data=data, evaluation=evaluation,
        setting=setting, seq_len=seq_len, calibration=calibration,
    )  # fmt: skip
    outcome = estimate_one(options)
    traced = run_trace(outcome.inputs) if trace else None
    stated, estimate = outcome.inputs.setting, outcome.estimate
    if plot is not None:
        from autotune.cli.plots import memory_breakdown_png

        cluster, key = outcome.inputs.cluster, outcome.inputs.spec.key
        title = f"{key} on {cluster.world_size}× {cluster.gpu.key}, seq_len {seq_len}: peak memory per GPU"
        memory_breakdown_png([(stated.short(), estimate)], plot, title=title)
    if json_:
        extra = {"trace": traced.model_dump(mode="json")} if traced is not None else {}
        print_json({**outcome.json_dict(), **extra})
        return
    if outcome.dataset is not None:
        console().print(dataset_table(outcome.dataset))
    render_estimate(estimate, stated, outcome.notes)
    if traced is not None:
        render_trace(traced)
        render_predicted_vs_traced([(stated.short(), estimate.peak_memory_gib, traced)])
    if plot is not None:
        console().print(f"[green]wrote[/] {plot}")
