"""``autotune launch``: run a plan (a ``plan.yaml``, or a MODEL planned first) with the shared training core.

Parses options, builds the launch spec with :mod:`autotune.launcher` (pure), renders it with rich,
and hands it to the thin runner. No heavy imports: the training core runs in a subprocess.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from autotune.cli.app import app
from autotune.errors import InvalidRequestError
from autotune.launcher import (
    LaunchOptions,
    LaunchSpec,
    apply_overrides,
    build_launch_spec,
    changed_fields,
    check_output_dir,
    load_plan,
    run_launch,
)
from autotune.launcher.overrides import Estimator, GpuResolver
from autotune.schemas.estimate import Estimate
from autotune.schemas.plan import PlanFile

_PLAN_SUFFIXES = (".yaml", ".yml")
_FIELDS = LaunchOptions.model_fields

_stdout = Console(highlight=False)
_stderr = Console(stderr=True, highlight=False, soft_wrap=True)


def _help(name: str) -> str:
    return _FIELDS[name].description or ""


LAUNCH_CONTEXT = {"allow_extra_args": True, "ignore_unknown_options": True}
"""Unknown options are collected (``ctx.args``): plan options for a MODEL, refused for a plan file."""


@app.command(
    "launch",
    context_settings=LAUNCH_CONTEXT,
    help="Run a plan with the shared training core: PLAN.yaml (from `autotune plan -o`) or MODEL [plan options].",
)
def launch(
    ctx: typer.Context,
    target: Annotated[str, typer.Argument(metavar="PLAN.yaml|MODEL", help="A plan file, or a model to plan first.")],
    dataset: Annotated[str, typer.Option("--dataset", help=_help("dataset"))],
    output_dir: Annotated[Path, typer.Option("--output-dir", help=_help("output_dir"))],
    dataset_format: Annotated[str, typer.Option("--dataset-format", help=_help("dataset_format"))] = "auto",
    max_steps: Annotated[int | None, typer.Option("--max-steps", help=_help("max_steps"))] = None,
    cpu: Annotated[bool, typer.Option("--cpu", help=_help("cpu"))] = False,
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="Print the files, command and environment; write and run nothing."),
    ] = False,
    resume: Annotated[bool, typer.Option("--resume", help=_help("resume"))] = False,
    detach: Annotated[
        bool,
        typer.Option(
            "--detach",
            help="Run in the background (output in OUT/launch.log); the run survives the launcher and the terminal.",
        ),
    ] = False,
    sets: Annotated[
        list[str] | None,
        typer.Option("--set", metavar="KEY=VALUE", help="Override a plan field, e.g. micro_batch_size=2 (repeatable)."),
    ] = None,
    slurm: Annotated[bool, typer.Option("--slurm", help=_help("slurm"))] = False,
    node_rank: Annotated[int, typer.Option("--node-rank", help=_help("node_rank"))] = 0,
    main_process_ip: Annotated[str | None, typer.Option("--main-process-ip", help=_help("main_process_ip"))] = None,
    main_process_port: Annotated[
        int | None, typer.Option("--main-process-port", help=_help("main_process_port"))
    ] = None,
    save_steps: Annotated[int | None, typer.Option("--save-steps", help=_help("save_steps"))] = None,
    logging_steps: Annotated[int | None, typer.Option("--logging-steps", help=_help("logging_steps"))] = None,
    learning_rate: Annotated[float | None, typer.Option("--learning-rate", help=_help("learning_rate"))] = None,
    warmup_ratio: Annotated[float | None, typer.Option("--warmup-ratio", help=_help("warmup_ratio"))] = None,
    seed: Annotated[int | None, typer.Option("--seed", help=_help("seed"))] = None,
) -> None:
    """Plan (if given a MODEL), apply ``--set`` overrides, build the spec, print it, and run it."""
    options = _options(
        dataset=_absolute_if_local(dataset),
        dataset_format=dataset_format,
        output_dir=str(output_dir.expanduser().absolute()),
        max_steps=max_steps,
        cpu=cpu,
        resume=resume,
        slurm=slurm,
        node_rank=node_rank,
        main_process_ip=main_process_ip,
        main_process_port=main_process_port,
        save_steps=save_steps,
        logging_steps=logging_steps,
        learning_rate=learning_rate,
        warmup_ratio=warmup_ratio,
        seed=seed,
    )
    plan = resolve_plan(target, list(ctx.args))
    if sets:
        estimate, resolve_gpu = default_estimator()
        plan = override_plan(plan, sets, estimate=estimate, resolve_gpu=resolve_gpu)
    spec = build_launch_spec(plan, options)
    if not dry_run:
        check_output_dir(options.output_dir, resume=resume)
    render_spec(spec, options, dry_run=dry_run)
    code = run_launch(spec, options.output_dir, resume=resume, dry_run=dry_run, detach=detach)
    if code != 0:
        # SystemExit, not typer.Exit: in non-standalone mode click returns typer.Exit's code from app(),
        # and the trainer's exit code must reach the shell.
        raise SystemExit(code)


def resolve_plan(target: str, plan_args: list[str]) -> PlanFile:
    """The plan to run: ``target`` loaded as a plan file, or planned from a MODEL with ``plan_args``.

    Raises:
        ConfigError: the plan file is missing or invalid.
        InvalidRequestError: plan options given with a plan file; planning from a MODEL (not yet here).
    """
    if target.endswith(_PLAN_SUFFIXES):
        if plan_args:
            raise InvalidRequestError(
                f"unexpected argument(s) {' '.join(plan_args)}: plan options apply when launching a MODEL; "
                "to change a plan file's fields use --set key=value"
            )
        return load_plan(target)
    return plan_from_model(target, plan_args)


def plan_from_model(model: str, plan_args: list[str]) -> PlanFile:
    """Plan ``model`` with the options of ``autotune plan`` (``plan_args``, unparsed) and return the best plan.

    Raises:
        click.UsageError / AutotuneError: bad plan options, unknown model or GPU, nothing fits.
    """
    from autotune.cli.plan_cmd import parse_plan_args, plan_from_options
    from autotune.cli.render import console

    plan_file, _, notes = plan_from_options(**parse_plan_args(model, plan_args))
    for note in notes:
        console.print(f"[yellow]note:[/] {note}")
    console.print(f"planned: {plan_file.setting.short()}")
    return plan_file


def default_estimator() -> tuple[Estimator, GpuResolver]:
    """The cost model and GPU catalog, imported on use (the launcher itself does not depend on them)."""
    from autotune.costmodel.estimate import estimate_setting
    from autotune.profiles.catalog import resolve_gpu

    return estimate_setting, lambda key: resolve_gpu(key)[0]


def override_plan(plan: PlanFile, sets: list[str], *, estimate: Estimator, resolve_gpu: GpuResolver) -> PlanFile:
    """Apply ``--set`` overrides, print what changed, and warn (stderr, one line) if it no longer fits."""
    new_plan = apply_overrides(plan, sets, estimate=estimate, resolve_gpu=resolve_gpu)
    changes = changed_fields(plan, new_plan)
    if changes:
        shown = ", ".join(f"{key} {old} → {new}" for key, old, new in changes)
        _stderr.print(f"overrides: {shown}", markup=False)
    if not new_plan.prediction.fits:
        _stderr.print(f"[bold yellow]warning:[/] {fit_warning(new_plan.prediction)}", highlight=False)
    return new_plan


def fit_warning(prediction: Estimate) -> str:
    """One line saying why the overridden setting is predicted not to fit (GPU memory, else host RAM)."""
    need_gib = prediction.peak_memory_gib + prediction.cuda_context_gib + prediction.memory_uncertainty_gib
    if need_gib > prediction.gpu_memory_gib:
        return (
            f"with the overrides the plan no longer fits: peak {prediction.peak_memory_gib:.1f} GiB + "
            f"context {prediction.cuda_context_gib:.1f} + band {prediction.memory_uncertainty_gib:.1f} = "
            f"{need_gib:.1f} GiB > {prediction.gpu_memory_gib:.1f} GiB per GPU (the run may go out of memory)"
        )
    return (
        f"with the overrides the plan no longer fits: CPU offload needs {prediction.host_memory_gib:.1f} GiB "
        "of host RAM per node, more than the plan's node has"
    )


def format_command(argv: list[str]) -> str:
    """The command as shell text, one option (with its values) per line, joined by ``\\`` continuations."""
    lines: list[list[str]] = [[]]
    for arg in argv:
        if arg.startswith("-") and lines[-1]:
            lines.append([])
        lines[-1].append(arg)
    return " \\\n    ".join(shlex.join(words) for words in lines if words)


def render_spec(spec: LaunchSpec, options: LaunchOptions, *, dry_run: bool) -> None:
    """Print the command panel and the files and environment tables; with ``dry_run`` each file's content."""
    out = Path(options.output_dir)
    title = "dry run: nothing written, nothing run" if dry_run else "launching"
    placement = f"{spec.num_nodes} node(s) × {spec.num_processes_per_node} process(es) per node"
    _stdout.print(Panel(Text(format_command(spec.argv)), title=title, subtitle=placement, title_align="left"))
    files = Table(title=f"files in {out}", title_justify="left", show_edge=False)
    files.add_column("file")
    files.add_column("lines", justify="right")
    for relative, content in spec.files.items():
        files.add_row(relative, str(content.count("\n")))
    env = Table(title="environment", title_justify="left", show_edge=False)
    env.add_column("variable")
    env.add_column("value")
    for name, value in spec.env.items():
        env.add_row(name, value)
    _stdout.print(files)
    _stdout.print(env)
    if dry_run:
        for relative, content in spec.files.items():
            _stdout.print(Panel(Text(content.rstrip("\n")), title=str(out / relative), title_align="left"))
    for note in spec.notes:
        _stdout.print(f"[yellow]note:[/] {note}", highlight=False)


def _options(**values: object) -> LaunchOptions:
    """Validate the options; an error names the flag (``--max-steps: ...``)."""
    try:
        return LaunchOptions.model_validate(values)
    except ValidationError as error:
        first = error.errors()[0]
        flag = "--" + str(first["loc"][0]).replace("_", "-") if first["loc"] else "options"
        raise InvalidRequestError(f"{flag}: {first['msg']} (got {first.get('input')!r})") from None


def _absolute_if_local(dataset: str) -> str:
    """A dataset found on disk as an absolute path (the run may start elsewhere); hub names unchanged."""
    path = Path(dataset).expanduser()
    return str(path.absolute()) if path.exists() else dataset
