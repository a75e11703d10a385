"""``autotune plan``: search every setting, print the best that fits, optionally write plan.yaml."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import typer

from autotune.cli import options as opt
from autotune.cli._shared import coefficients_from_option
from autotune.cli.app import app
from autotune.cli.render import console, print_json, render_plan
from autotune.cli.resolve import build_request
from autotune.planner.build import build_plan_file
from autotune.planner.request import PlanRequest
from autotune.planner.search import PlanResult, search
from autotune.schemas.plan import PlanFile


def request_from_options(
    model: str,
    gpu: str,
    num_gpus: int = 1,
    num_nodes: int = 1,
    host_memory_gib: float | None = None,
    seq_len: int = 2048,
    global_batch_size: int = 32,
    num_samples: int | None = None,
    dataset_tokens: int | None = None,
    epochs: float = 1.0,
    objective: str = "quality",
    calibration: Path | None = None,
    **overrides: Any,
) -> tuple[PlanRequest, list[str]]:
    """Build a validated PlanRequest from ``plan``'s options (also used by ``launch MODEL``)."""
    coefficients, calibration_name = coefficients_from_option(calibration)
    return build_request(
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
        overrides=overrides,
        coefficients=coefficients,
        calibration_name=calibration_name,
    )


def plan_from_options(**options: Any) -> tuple[PlanFile, PlanResult, list[str]]:
    """Plan from ``plan``'s options: returns the plan file, the search result and notes for the user."""
    request, notes = request_from_options(**options)
    result = search(request)
    return build_plan_file(request, result), result, notes


PLAN_OUTPUT_PARAMS = frozenset({"output", "json_", "plot", "verify"})
"""``plan`` parameters that choose what to print or write, not what to plan."""


def options_from_params(params: dict[str, Any]) -> dict[str, Any]:
    """Planning options from the parsed parameters of the ``plan`` command (click's ``ctx.params``)."""
    options = {name: value for name, value in params.items() if name not in PLAN_OUTPUT_PARAMS}
    options["compile"] = options.pop("compile_", None)
    options["lora_targets"] = parse_lora_targets(options.get("lora_targets"))
    return options


def parse_plan_args(model: str, args: list[str]) -> dict[str, Any]:
    """Parse ``[MODEL, *args]`` exactly as ``autotune plan`` does (used by ``autotune launch MODEL ...``).

    Raises:
        click.UsageError: unknown or malformed options (rendered as one line by the CLI).
    """
    from autotune.cli.app import app

    group = typer.main.get_command(app)
    command = group.commands["plan"]  # type: ignore[attr-defined]
    context = command.make_context("autotune launch", [model, *args])
    given = [name for name in PLAN_OUTPUT_PARAMS if context.params.get(name) not in (None, False)]
    if given:
        from autotune.errors import InvalidRequestError

        raise InvalidRequestError(
            f"{', '.join(sorted(given))}: output options of 'autotune plan' do not apply to launch; "
            "run 'autotune plan ... -o plan.yaml' first"
        )
    return options_from_params(dict(context.params))


def parse_lora_targets(value: str | None) -> tuple[str, ...] | None:
    """'q_proj,v_proj' → ('q_proj', 'v_proj'); None stays None."""
    if value is None:
        return None
    return tuple(part.strip() for part in value.split(",") if part.strip())


@app.command("plan")
def plan_command(
    ctx: typer.Context,
    model: opt.ModelArg,
    gpu: opt.GpuOpt,
    num_gpus: opt.NumGpusOpt = 1,
    num_nodes: opt.NumNodesOpt = 1,
    host_memory_gib: opt.HostMemoryOpt = None,
    seq_len: opt.SeqLenOpt = 2048,
    global_batch_size: opt.GlobalBatchOpt = 32,
    objective: opt.ObjectiveOpt = "quality",
    method: opt.MethodOpt = None,
    micro_batch_size: opt.MicroBatchOpt = None,
    grad_accum: opt.GradAccumOpt = None,
    grad_ckpt: opt.GradCkptOpt = None,
    compile_: Annotated[bool | None, typer.Option("--compile/--no-compile", help="torch.compile.")] = None,
    sharding: opt.ShardingOpt = None,
    optimizer: opt.OptimizerOpt = None,
    precision: opt.PrecisionOpt = None,
    lora_rank: opt.LoraRankOpt = None,
    lora_alpha: opt.LoraAlphaOpt = None,
    lora_targets: opt.LoraTargetsOpt = None,
    loss_impl: opt.LossImplOpt = None,
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
    options = options_from_params(dict(ctx.params))
    plan_file, result, notes = plan_from_options(**options)
    elapsed = time.perf_counter() - started
    if verify:
        from autotune.cli.plan_verify import verify_plan

        plan_file, result, verify_notes = verify_plan(options, plan_file, result)
        notes += verify_notes
    if output is not None:
        from autotune.launcher.plan_io import save_plan

        save_plan(plan_file, output)
    if plot is not None:
        from autotune.cli.plots import memory_breakdown_png

        bars = [(f"chosen: {plan_file.setting.short()}", plan_file.prediction)]
        bars += [(alt.setting.short(), alt.prediction) for alt in plan_file.alternatives]
        cluster = plan_file.cluster
        title = (
            f"{plan_file.model.key} on {cluster.num_nodes * cluster.num_gpus_per_node}× {cluster.gpu}, "
            f"seq_len {plan_file.workload.seq_len}: chosen setting and runner-ups"
        )
        memory_breakdown_png(bars, plot, title=title)
    if json_:
        data = plan_file.model_dump(mode="json")
        print_json(
            {
                "plan": {"setting": data["setting"], **data["prediction"]},
                "alternatives": [{"setting": a["setting"], **a["prediction"]} for a in data["alternatives"]],
                "rejected": data["rejected"],
                "notes": notes,
                "searched": result.searched,
                "plan_file": data,
            }
        )
        return
    render_plan(plan_file, notes, result.searched, elapsed)
    if output is not None:
        console.print(f"[green]wrote[/] {output}  (run it: autotune launch {output} --dataset DATA --output-dir RUN)")
    if plot is not None:
        console.print(f"[green]wrote[/] {plot}")
