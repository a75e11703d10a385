"""``autotune launch``: run a plan (a ``plan.yaml``, or a MODEL planned first) with the shared training core.

Parses options, builds the launch spec with :mod:`autotune.launcher` (pure), renders it with rich,
and hands it to the thin runner. No heavy imports: the training core runs in a subprocess.
"""

from __future__ import annotations

import difflib
import functools
import shlex
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from autotune import run_lock
from autotune.cli.console import console, err_console, note, rule_width, warn
from autotune.cli.plan_recheck import check_like_plan, recheck_plan_file, seq_len_warning
from autotune.cli.setting_options import schema_group, takes_option_groups
from autotune.errors import ConfigError, InvalidRequestError
from autotune.hostcpu import cpu_precision_note
from autotune.launcher import (
    LaunchOptions,
    LaunchSpec,
    apply_overrides,
    changed_fields,
    run_launch,
)
from autotune.launcher.checks import LaunchContext, run_checks
from autotune.launcher.overrides import Estimator, GpuResolver
from autotune.launcher.rundir import set_aside_report
from autotune.launcher.runner import prepare_output_dir
from autotune.launcher.skypilot import installed_checkout
from autotune.planner.fit import fit_shortfall
from autotune.quiet import quiet_third_party
from autotune.schemas.plan import PlanFile
from autotune.schemas.plan_io import load_plan
from autotune.schemas.trainer_options import option_flag
from autotune.session.calibration_choice import plan_estimator
from autotune.session.node_needs import with_node_needs
from autotune.session.option_groups import NO_EVAL, EvalOptions, OptionGroup
from autotune.session.resolve import catalog_gpu
from autotune.validation import format_validation_error

_PLAN_SUFFIXES = (".yaml", ".yml")
_FIELDS = LaunchOptions.model_fields


def _help(name: str) -> str:
    """The option's help: the schema field's description, and its default where the option shows none itself.

    Options whose typer default is None (so that "not given" can be told apart) show none; None defaults are described
    in the text, e.g. the plan's learning rate.
    """
    field = _FIELDS[name]
    text = field.description or ""
    default = field.get_default()
    if field.is_required() or default is None or isinstance(default, bool) or "default" in text.lower():
        return text
    return f"{text} (default: {default})"


RUN_OPTION_NAMES = (
    "dataset_format", "max_steps", "cpu", "resume", "slurm", "skypilot", "bucket", "spot", "submit", "node_rank",
    "main_process_ip", "main_process_port", "save_steps", "logging_steps", "learning_rate", "warmup_ratio", "seed",
    "full_determinism", "report_to", "profile_steps",
)  # fmt: skip
"""The launch options that are :class:`LaunchOptions` fields as they are: one group, declared by the schema."""

RunOptions = schema_group(LaunchOptions, RUN_OPTION_NAMES, _help, stated=("dataset_format", "node_rank"))
RunOpt = Annotated[OptionGroup, RunOptions]
NO_RUN_OPTIONS = RunOptions()


@takes_option_groups()
def launch_command(
    ctx: typer.Context,
    target: Annotated[str, typer.Argument(metavar="PLAN.yaml|MODEL", help="A plan file, or a model to plan first.")],
    dataset: Annotated[str, typer.Option("--dataset", help=_help("dataset"))],
    output_dir: Annotated[Path, typer.Option("--output-dir", help=_help("output_dir"))],
    run: RunOpt = NO_RUN_OPTIONS,
    evaluation: EvalOptions = NO_EVAL,
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="Print the command, the files and the environment; write and run nothing."),
    ] = False,
    show_files: Annotated[
        bool, typer.Option("--show-files", help="Also print the content of every file the launch writes.")
    ] = False,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose", help="Show the training stack's own log lines, warnings and progress bars (quiet by default)."
        ),
    ] = False,
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
    calibration: Annotated[
        Path | None,
        typer.Option(
            "--calibration",
            help="Calibration YAML that --set re-estimates with (default: the plan's, found by its name).",
        ),
    ] = None,
) -> None:
    """Run a plan with the shared training core: a PLAN.yaml, or a MODEL planned first.

    PLAN.yaml comes from `autotune plan -o`; a MODEL is planned first with the options of `autotune plan`, on
    --dataset as `autotune plan --dataset` plans (--packing, --tokenizer and --max-rows apply).
    """
    if verbose:
        quiet_third_party(verbose=True)  # exports AUTOTUNE_VERBOSE=1 for the trainer
    options = launch_options(dataset, output_dir, run, evaluation, detach=detach)
    plan, options, plan_check, warnings = launch_plan(ctx, target, options, sets, calibration)
    # Every check runs before the run directory is created, in a launch and a dry run alike (one ordered list).
    context = LaunchContext(plan=plan, options=options, dry_run=dry_run, recheck=plan_check, resolve_gpu=catalog_gpu)
    checked = run_checks(context)
    for line in warnings + checked.warnings:  # after every refusal: a refused launch prints one line
        warn(line)
    start_launch(checked, dry_run=dry_run, show_files=show_files, detach=detach)


def launch_plan(
    ctx: typer.Context, target: str, options: LaunchOptions, sets: list[str] | None, calibration: Path | None
) -> tuple[PlanFile, LaunchOptions, Callable[[PlanFile], list[str]], list[str]]:
    """The plan launch runs (``target`` read, or a MODEL planned with ``ctx``'s plan options), ``--set`` applied.

    Returns the plan, the options with the plan's eval set, the plan-file re-check to run among the launch checks
    and the warnings of ``--set``.

    Raises:
        AutotuneError: the plan file or the MODEL's planning refuses, or a ``--set`` value is refused (one line).
    """
    plan_args = list(ctx.args)
    if not target.endswith(_PLAN_SUFFIXES):  # a MODEL is planned on launch's data (as plan --dataset) and eval set
        plan_args += dataset_args(options) + eval_args(options)
    plan = resolve_plan(
        target, plan_args, plan_command=lambda: _plan_click_command(ctx), launch_flags=_flags(ctx.command)
    )
    options = with_node_needs(with_plan_eval(options, plan), plan)
    if sets:  # override_plan re-checks the new setting like plan and warns if it no longer fits
        estimate, resolve_gpu = plan_estimator(plan, calibration)
        plan = override_plan(plan, sets, estimate=estimate, resolve_gpu=resolve_gpu)
        return plan, options, plan_check_none, [f"--set: {text}" for text in [seq_len_warning(plan)] if text]
    if target.endswith(_PLAN_SUFFIXES):
        return plan, options, functools.partial(recheck, target=target, calibration=calibration), []
    return plan, options, plan_check_none, []


def launch_options(
    dataset: str, output_dir: Path, run: OptionGroup, evaluation: EvalOptions, *, detach: bool
) -> LaunchOptions:
    """The validated :class:`LaunchOptions` of launch's arguments (local paths made absolute).

    Raises:
        InvalidRequestError: ``--submit`` without ``--slurm``, ``--skypilot`` with ``--detach``, or a value the schema
            refuses (one line naming the option).
    """
    given = run.given()
    if given.get("submit") and not given.get("slurm"):
        raise InvalidRequestError("--submit submits the SLURM script of --slurm: add --slurm")
    if given.get("skypilot") and detach:
        raise InvalidRequestError(
            "--detach runs a launch here in the background; --skypilot runs nothing here: drop --detach"
        )
    eval_dataset = evaluation.eval_dataset
    return _options(
        **given,
        dataset=_absolute_if_local(dataset),
        output_dir=str(output_dir.expanduser().absolute()),
        project_dir=installed_checkout() if given.get("skypilot") else None,
        python=sys.executable if given.get("slurm") else None,
        eval_dataset=_absolute_if_local(eval_dataset) if eval_dataset is not None else None,
        eval_fraction=evaluation.eval_fraction,
        eval_steps=evaluation.eval_steps,
    )


def start_launch(checked: LaunchContext, *, dry_run: bool, show_files: bool, detach: bool) -> None:
    """After every check passed: write the job files (SLURM, SkyPilot) or show and run the launch.

    Raises:
        SystemExit: the training core's exit code, when it is not 0.
    """
    options, spec, restart, out, plan = checked.options, checked.spec, checked.restart, checked.out, checked.plan
    assert spec is not None
    if restart and not options.skypilot:  # --skypilot rewrites the files of a task that never ran here
        prepare_restart(out, dry_run=dry_run)
    if (options.skypilot or (options.slurm and not options.submit)) and not dry_run:
        write_job_files(spec, options, existing=options.resume or restart)
        return
    render_spec(spec, options, dry_run=dry_run, show_files=show_files)
    console().print(Text(training_line(plan, options)), soft_wrap=True)
    precision_note = cpu_precision_note(plan.setting.precision) if options.cpu else None
    if precision_note:  # the training core applies the same rule (autotune.hostcpu)
        console().print(f"[yellow]note:[/] {precision_note}", highlight=False)
    code = run_launch(spec, out, resume=options.resume or restart, dry_run=dry_run, detach=detach)
    if code != 0:
        # SystemExit, not typer.Exit: in non-standalone mode click returns typer.Exit's code from app(),
        # and the trainer's exit code must reach the shell.
        raise SystemExit(code)


def dataset_args(options: LaunchOptions) -> list[str]:
    """``plan`` options for launch's ``--dataset`` / ``--dataset-format``: a MODEL is planned on the data it trains on.

    So ``--packing``, ``--tokenizer`` and ``--max-rows`` act as in ``autotune plan --dataset``. A hub dataset of a
    ``--skypilot`` launch is not planned on (its nodes download it, not this machine): none then.
    """
    if options.skypilot and not Path(options.dataset).expanduser().is_file():
        return []
    return ["--dataset", options.dataset, "--dataset-format", options.dataset_format]


EVAL_OPTIONS = ("eval_dataset", "eval_fraction", "eval_steps")
"""The launch options the plan's eval settings stand for (``PlanFile.eval_data``, the steps of ``Workload.eval``)."""


def eval_args(options: LaunchOptions) -> list[str]:
    """The eval options given to launch, as ``autotune plan`` arguments (``launch MODEL`` prices them)."""
    return [arg for name in EVAL_OPTIONS if name in options.model_fields_set
            for arg in (option_flag(name), str(getattr(options, name)))]  # fmt: skip


def with_plan_eval(options: LaunchOptions, plan: PlanFile) -> LaunchOptions:
    """``options`` with the plan's eval data and ``eval_steps`` (``plan --eval-*``) unless launch gave its own.

    Any eval option on the launch's command line replaces the plan's three.
    """
    if plan.eval_data is None or set(EVAL_OPTIONS) & options.model_fields_set:
        return options
    values = {**options.model_dump(exclude_unset=True), **plan.eval_data.model_dump(exclude_none=True)}
    schedule = plan.workload.eval
    return _options(**values, eval_steps=schedule.steps if schedule is not None else None)


def prepare_restart(out: Path, *, dry_run: bool) -> None:
    """Start again in ``out``, a run directory that never trained (:func:`~autotune.launcher.rundir.never_trained`).

    Its launcher files were checked (:mod:`autotune.launcher.checks`); a previous report is kept under a new name.

    Raises:
        InvalidRequestError: its run is alive (started since the checks).
    """
    note(f"{out} never trained (no checkpoint): starting the run in it from step 0")
    if dry_run:
        return
    run_lock.probe(out)
    kept = set_aside_report(out)
    if kept is not None:
        note(f"the previous run_report.json is kept as {kept.name}")


def write_job_files(spec: LaunchSpec, options: LaunchOptions, *, existing: bool) -> None:
    """``--slurm`` without ``--submit``, or ``--skypilot``: write the run directory and say how to start the job.

    Nothing is run. The run directory holds the plan, configs and ``launch.sbatch`` / ``sky.yaml``; the command that
    starts it is ``spec.argv``. ``existing``: the directory is there (resumed or never trained).
    """
    written = prepare_output_dir(spec, options.output_dir, resume=existing)
    for path in written:
        console().print(Text(f"wrote {path}"), soft_wrap=True)
    if options.skypilot:
        console().print("not started; start it on the plan's GPUs with SkyPilot:")
    else:
        console().print("not submitted; submit it with (or add --submit):")
    console().print(Text(f"  {shlex.join(spec.argv)}"), soft_wrap=True)
    for line in spec.notes:
        console().print(f"[yellow]note:[/] {line}", highlight=False)


def _plan_click_command(ctx: typer.Context) -> Any:
    """``autotune plan``'s click command, from the root group (no command module imports another)."""
    root = ctx.find_root()
    return root.command.get_command(root, "plan")  # type: ignore[attr-defined]


def _flags(command: Any) -> list[str]:
    """Every ``--long`` option name of a click command."""
    return [name for param in command.params for name in getattr(param, "opts", []) if name.startswith("--")]


def resolve_plan(
    target: str, plan_args: list[str], *, plan_command: Callable[[], Any], launch_flags: Sequence[str] = ()
) -> PlanFile:
    """The plan to run: ``target`` loaded as a plan file, or planned from a MODEL with ``plan_args``.

    Raises:
        ConfigError: the plan file is missing or invalid.
        InvalidRequestError: an option neither launch nor plan knows (with the closest launch option), or
            plan options given with a plan file.
    """
    if target.endswith(_PLAN_SUFFIXES):
        for arg in plan_args:
            name = arg.partition("=")[0]
            if not name.startswith("--") or name in _flags(plan_command()):
                continue
            close = difflib.get_close_matches(name, list(launch_flags), n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise InvalidRequestError(f"no such option: {name}{hint}")
        if plan_args:
            raise InvalidRequestError(
                f"unexpected argument(s) {' '.join(plan_args)}: plan options apply when launching a MODEL; "
                "to change a plan file's fields use --set key=value"
            )
        return load_plan(target)
    return plan_from_model(target, plan_args, plan_command())


def plan_check_none(_plan: PlanFile) -> list[str]:
    """No plan-file re-check: a plan planned in this launch, or changed by ``--set``, was checked as it was made."""
    return []


def plan_from_model(model: str, plan_args: list[str], plan_command: Any) -> PlanFile:
    """Plan ``model`` with ``plan_args`` parsed by ``plan_command`` (``autotune plan``'s click command).

    Raises:
        click.UsageError / AutotuneError: bad plan options, unknown model or GPU, nothing fits.
    """
    from autotune.session.plan_one import data_plannable, plan_on_data
    from autotune.session.planning import parse_plan_args

    options = parse_plan_args(plan_command, model, plan_args)
    if options.dataset is not None and not data_plannable(options):
        note(
            f"planned without the lengths of {options.dataset}: {model} has no tokenizer here (--tokenizer DIR "
            "plans on the data, as plan --dataset does)"
        )
        options = replace(options, dataset=None)
    plan_file, _, notes = plan_on_data(options).astuple()
    for line in notes:
        console().print(f"[yellow]note:[/] {line}")
    console().print(f"planned: {plan_file.setting.short()}")
    return plan_file


def override_plan(plan: PlanFile, sets: list[str], *, estimate: Estimator, resolve_gpu: GpuResolver) -> PlanFile:
    """Apply ``--set`` overrides, print what changed, and warn (stderr, one line) if it no longer fits."""
    new_plan = apply_overrides(plan, sets, estimate=estimate, resolve_gpu=resolve_gpu)
    check_like_plan(new_plan, resolve_gpu)
    changes = changed_fields(plan, new_plan)
    if changes:
        shown = ", ".join(f"{key} {old} → {new}" for key, old, new in changes)
        err_console().print(f"overrides: {shown}", markup=False)
    if not new_plan.prediction.fits:
        warn(f"with the overrides the plan no longer fits: {fit_shortfall(new_plan.prediction)}")
    return new_plan


def recheck(plan: PlanFile, target: str, calibration: Path | None) -> list[str]:
    """Re-validate a plan file with ``autotune plan``'s rules; returns its warnings.

    The rules are :func:`autotune.cli.plan_recheck.recheck_plan_file`'s. A calibration that cannot be found leaves the
    fit unchecked (said in a warning).
    """
    from autotune.profiles.catalog import resolve_gpu

    try:
        estimate, resolver = plan_estimator(plan, calibration)
    except ConfigError as error:
        return recheck_plan_file(
            plan, target, resolve_gpu=lambda key: resolve_gpu(key)[0], estimate=None, estimator_error=str(error)
        )
    return recheck_plan_file(plan, target, resolve_gpu=resolver, estimate=estimate)


def format_command(argv: list[str]) -> str:
    r"""The command as shell text, one option (with its values) per line, joined by ``\`` continuations."""
    lines: list[list[str]] = [[]]
    for arg in argv:
        if arg.startswith("-") and lines[-1]:
            lines.append([])
        lines[-1].append(arg)
    return " \\\n    ".join(shlex.join(words) for words in lines if words)


def render_spec(spec: LaunchSpec, options: LaunchOptions, *, dry_run: bool, show_files: bool = False) -> None:
    """Print the command (plain, copyable) and the files and environment tables.

    Each file's content is printed only with ``show_files``.
    """
    out = Path(options.output_dir)
    title = "dry run: nothing written, nothing run" if dry_run else "launching"
    if options.slurm and not options.submit:
        title += " (--slurm writes the files; add --submit to also run this)"
    if options.skypilot:
        title += " (--skypilot writes the files; you start the task with this command)"
    placement = f"{spec.num_nodes} node(s) × {spec.num_processes_per_node} process(es) per node"
    console().print(f"[bold]{title}[/] ({placement}):")
    console().print(Text(format_command(spec.argv)), soft_wrap=True)
    files = Table(show_edge=False)
    files.add_column("file", no_wrap=True)
    files.add_column("lines", justify="right")
    for relative, content in spec.files.items():
        files.add_row(relative, str(content.count("\n")))
    env = Table(show_edge=False)
    env.add_column("variable", no_wrap=True)
    env.add_column("value", overflow="fold")
    for name, value in spec.env.items():
        env.add_row(name, value)
    console().print(Text(f"files in {out}:", style="italic"), soft_wrap=True)
    console().print(files)
    console().print(Text("environment:", style="italic"))
    console().print(env)
    if show_files:
        for relative, content in spec.files.items():
            console().print(Rule(str(out / relative), align="left"), width=rule_width())
            console().print(Text(content.rstrip("\n")), soft_wrap=True)
    elif dry_run:
        console().print("[dim]--show-files prints the files' contents[/]")
    for line in spec.notes:
        console().print(f"[yellow]note:[/] {line}", highlight=False)


def training_line(plan: PlanFile, options: LaunchOptions) -> str:
    """One line with the hyperparameters the run trains with, and the recipe's source.

    The hyperparameters are the plan's recipe with ``--learning-rate`` / ``--warmup-ratio`` applied (each marked as
    given).
    """
    recipe = plan.training.overridden(options.learning_rate, options.warmup_ratio)
    given = options.model_fields_set
    lr_text = f"lr {recipe.learning_rate:g}" + (" (--learning-rate)" if "learning_rate" in given else "")
    warmup_text = f"warm-up {recipe.warmup_ratio:g}" + (" (--warmup-ratio)" if "warmup_ratio" in given else "")
    parts = [lr_text, recipe.lr_scheduler, warmup_text, f"weight decay {recipe.weight_decay:g}"]
    parts.append(f"clip {recipe.max_grad_norm:g}")
    if plan.setting.uses_adapters:
        parts.append(f"lora dropout {plan.setting.lora_dropout:g}, adapters {plan.setting.adapter_dtype}")
    source = f" [{recipe.source}]" if recipe.source else ""
    return "training: " + ", ".join(parts) + source


def _options(**values: object) -> LaunchOptions:
    """Validate the options given (None = not given: the schema's default); an error names the flag."""
    try:
        return LaunchOptions.model_validate({name: value for name, value in values.items() if value is not None})
    except ValidationError as error:
        raise InvalidRequestError(format_validation_error(error, LaunchOptions, flags=True)) from None


def _absolute_if_local(dataset: str) -> str:
    """A dataset found on disk as an absolute path (the run may start elsewhere); hub names unchanged."""
    path = Path(dataset).expanduser()
    return str(path.absolute()) if path.exists() else dataset
