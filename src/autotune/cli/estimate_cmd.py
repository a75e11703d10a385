"""``autotune estimate``: predict memory and time for one fixed setting (no search)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from autotune.cli import options as opt
from autotune.cli._shared import coefficients_from_option
from autotune.cli.attention_note import masked_attention_notes
from autotune.cli.console import console
from autotune.cli.dataset_lengths import (
    check_packing,
    dataset_samples,
    packing_choice_note,
    packing_layouts,
    packing_note,
)
from autotune.cli.dataset_plan import eval_dataset_stats
from autotune.cli.render import dataset_table, print_json, render_estimate
from autotune.cli.resolve import (
    eval_data,
    evaluated_workload,
    host_memory_note,
    kernels_notes,
    lora_dropout_notes,
    offload_time_notes,
    warn_eval_is_training_data,
)
from autotune.cli.setting_options import NOT_GIVEN, SettingOptions, takes_setting_options
from autotune.cli.tracing import (
    render_predicted_vs_traced,
    render_trace,
    require_torch,
    run_trace,
    setting_inputs,
)
from autotune.costmodel.estimate import estimate_setting
from autotune.errors import InvalidRequestError
from autotune.planner.packing import choose_packing
from autotune.planner.space import sharding_error
from autotune.schemas.calibration import CostCoefficients
from autotune.schemas.dataset_stats import DEFAULT_MAX_ROWS, DatasetStats, Packing, packed_batches, padded_batches
from autotune.schemas.estimate import Estimate
from autotune.schemas.hardware import ClusterSpec
from autotune.schemas.model import ModelSpec
from autotune.schemas.setting import DEFAULT_SEQ_LEN, TrainingSetting, Workload


def estimate_dataset(
    spec: ModelSpec,
    cluster: ClusterSpec,
    packed: Workload,
    setting: TrainingSetting,
    coefficients: CostCoefficients,
    stats: DatasetStats,
    packing: str,
    evaluate: Callable[[Workload], Workload] | None = None,
) -> tuple[Packing, Workload, Estimate, list[str]]:
    """The estimate of ``setting`` on ``stats``'s examples as ``packing`` says (``auto``: the faster whole run).

    ``packed``: the workload of the packed blocks; ``evaluate``: each layout's workload with its eval set priced
    (``resolve.evaluated_workload``). Returns the layout, its workload, its estimate and notes (the
    layout's workload, and with ``auto`` both runs' times). With ``auto`` and neither layout fitting: packed.
    """
    padded = packed.with_batches(padded_batches(stats))
    packed = packed.with_batches(packed_batches(stats))
    workloads: dict[Packing, Workload] = {"packed": packed, "padded": padded}
    if evaluate is not None:
        workloads = {layout: evaluate(workload) for layout, workload in workloads.items()}
    layouts = packing_layouts(packing)
    estimates = {
        layout: estimate_setting(spec, cluster, workloads[layout], setting, coefficients) for layout in layouts
    }
    fitting = {layout: e.total_time_s if e.fits else None for layout, e in estimates.items()}
    chosen = choose_packing(fitting) if any(t is not None for t in fitting.values()) else layouts[0]
    notes = [packing_note(stats, chosen)]
    if len(layouts) > 1:
        notes.append(
            packing_choice_note(chosen, {layout: e.total_time_s for layout, e in estimates.items()}, "estimate")
        )
    return chosen, workloads[chosen], estimates[chosen], notes


@takes_setting_options(stated=True)
def estimate_command(
    model: opt.ModelArg,
    gpu: opt.GpuOpt,
    num_gpus: opt.NumGpusOpt = 1,
    num_nodes: opt.NumNodesOpt = 1,
    host_memory_gib: opt.HostMemoryOpt = None,
    seq_len: opt.SeqLenOpt = DEFAULT_SEQ_LEN,
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
    check_packing(packing, dataset)
    evaluation = eval_data(eval_dataset, eval_fraction, eval_steps)
    stats: DatasetStats | None = None
    dataset_notes: list[str] = []
    if dataset is not None:
        sized = num_samples is not None or dataset_tokens is not None
        num_samples, stats, dataset_notes = dataset_samples(
            model, dataset, tokenizer, dataset_format, max_rows, seq_len, sized
        )
    inputs = setting_inputs(
        model,
        gpu,
        num_gpus,
        num_nodes,
        host_memory_gib,
        setting,
        seq_len=seq_len,
        num_samples=num_samples,
        dataset_tokens=dataset_tokens,
        epochs=epochs,
    )
    spec, cluster, notes, workload = inputs.spec, inputs.cluster, dataset_notes + inputs.notes, inputs.workload
    stated = inputs.setting
    eval_stats = None
    if evaluation is not None and evaluation.eval_dataset is not None and workload.total_samples is not None:
        eval_stats = eval_dataset_stats(model, evaluation.eval_dataset, tokenizer, dataset_format, max_rows, seq_len)
    warn_eval_is_training_data(dataset, eval_dataset)
    rows = stats.rows_total if stats is not None else None
    evaluate = functools.partial(
        evaluated_workload, evaluation=evaluation, eval_steps=eval_steps, dataset_rows=rows, eval_stats=eval_stats
    )
    coefficients, _ = coefficients_from_option(calibration)
    topology_error = sharding_error(stated.sharding, cluster.world_size)
    if topology_error:
        raise InvalidRequestError(topology_error)
    if stats is not None:
        chosen, workload, estimate, layout_notes = estimate_dataset(
            spec, cluster, workload, stated, coefficients, stats, packing, evaluate
        )
        stats = stats.model_copy(update={"packing": chosen})
        notes = layout_notes + notes
    else:
        workload = evaluate(workload)
        estimate = estimate_setting(spec, cluster, workload, stated, coefficients)
    notes += host_memory_note(cluster, host_memory_gib, [stated])
    notes += lora_dropout_notes(spec, [stated])
    notes += kernels_notes([stated])
    notes += offload_time_notes(cluster, stated)
    notes += masked_attention_notes(spec, cluster, workload, stated, coefficients, estimate.step_time_s)
    if not estimate.fits:
        notes.append(_nearest_note(spec, cluster, workload, estimate, stated.method, coefficients))
    traced = run_trace(inputs) if trace else None
    if plot is not None:
        from autotune.cli.plots import memory_breakdown_png

        title = f"{spec.key} on {cluster.world_size}× {cluster.gpu.key}, seq_len {seq_len}: peak memory per GPU"
        memory_breakdown_png([(stated.short(), estimate)], plot, title=title)
    if json_:
        extra = {"trace": traced.model_dump(mode="json")} if traced is not None else {}
        if stats is not None:
            extra["dataset"] = stats.model_dump(mode="json")
        data = {**estimate.model_dump(mode="json"), "setting": stated.model_dump(mode="json"), "notes": notes}
        print_json({**data, **extra})
        return
    if stats is not None:
        console().print(dataset_table(stats))
    render_estimate(estimate, stated, notes)
    if traced is not None:
        render_trace(traced)
        render_predicted_vs_traced([(stated.short(), estimate.peak_memory_gib, traced)])
    if plot is not None:
        console().print(f"[green]wrote[/] {plot}")


def _nearest_note(
    spec: ModelSpec,
    cluster: ClusterSpec,
    workload: Workload,
    estimate: Estimate,
    method: str,
    coefficients: CostCoefficients,
) -> str:
    """'does not fit: …; nearest that fits: …' — the planner's best with the same method (else any method)."""
    from autotune.planner.fit import fit_shortfall, nearest_fitting
    from autotune.planner.request import PlanRequest

    request = PlanRequest(
        model=spec, model_source=spec.key, cluster=cluster, workload=workload, coefficients=coefficients
    )
    nearest = nearest_fitting(request, {"method": method})
    head = f"does not fit: {fit_shortfall(estimate)}"
    if nearest is None:
        return head + "; nothing fits this model and sequence length on these GPUs"
    e = nearest.estimate
    return head + (
        f"; nearest that fits: {nearest.setting.short()} (peak {e.peak_memory_gib:.1f} GiB, "
        f"{e.tokens_per_s:,.0f} tokens/s; autotune plan shows why)"
    )
