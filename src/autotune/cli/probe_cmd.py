"""``autotune probe``: run a few real steps of a plan (and its neighbours) on this machine's GPUs.

Then recalibrate from what they measured and show how the plan's prediction moved.

The runs go through the launcher (``build_launch_spec`` + ``run_launch``) into run directories under a
temporary directory (removed afterwards) or ``--runs-dir`` (kept). GPUs are detected without importing
torch in this process: ``nvidia-smi -L``, else ``rocm-smi --showproductname``. Both the detector and the
runner are parameters of :func:`probe`, so the GPU path is tested with fakes.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from autotune.calibration.recalibrate import Collected, Recalibration, collect
from autotune.cli.console import console
from autotune.cli.refit import (
    CONFIG_DIR_EPILOG,
    NameOpt,
    OutputOpt,
    SeedsOpt,
    StartOpt,
    fit_and_write,
    print_collected,
    render_recalibration,
    resolve_output,
)
from autotune.costmodel.estimate import estimate_setting
from autotune.errors import InvalidRequestError
from autotune.launcher import LaunchOptions, LaunchSpec, build_launch_spec, run_launch
from autotune.launcher.gpus import detect_gpus
from autotune.launcher.overrides import micro_batch_neighbours
from autotune.launcher.plan_gpus import machine_gpus, too_few_gpus
from autotune.profiles.catalog import resolve_gpu
from autotune.profiles.run_reports import RUN_REPORT_FILE
from autotune.schemas.calibration import CostCoefficients
from autotune.schemas.estimate import Estimate
from autotune.schemas.hardware import ClusterSpec
from autotune.schemas.plan import PlanFile
from autotune.schemas.plan_io import load_plan
from autotune.session.calibration_choice import coefficients_from_option, plan_coefficients
from autotune.session.resolve import catalog_gpu

GpuDetector = Callable[[], list[str]]
"""Returns the names of this machine's GPUs (empty when there are none)."""

ProbeRunner = Callable[[LaunchSpec, Path], int]
"""Writes the spec's files into the run directory, runs it, returns its exit code (:func:`launch_run`)."""

NO_GPU_MESSAGE = (
    "autotune probe runs real training steps and needs a CUDA or ROCm GPU, but none was found "
    "(nvidia-smi -L / rocm-smi); run probe on the GPU machine, or there run `autotune launch PLAN.yaml "
    "--dataset D --output-dir RUN --max-steps 20` and then `autotune calibrate RUN`"
)

EPILOG = CONFIG_DIR_EPILOG
"""The end of this command's help (the command table in app.py reads it)."""


def launch_run(spec: LaunchSpec, output_dir: Path) -> int:
    """The real runner: the launcher's ``run_launch`` (writes the run directory, runs the trainer)."""
    return run_launch(spec, output_dir, resume=False, dry_run=False)


def neighbour_plans(plan: PlanFile, coefficients: CostCoefficients) -> list[PlanFile]:
    """The plan's micro-batch neighbours re-estimated with ``coefficients``.

    The neighbours are :func:`autotune.launcher.overrides.neighbour_plans`.
    """
    estimate = partial(estimate_setting, coefficients=coefficients)
    return micro_batch_neighbours(plan, estimate=estimate, resolve_gpu=lambda key: resolve_gpu(key)[0])


def _check_machine(plan: PlanFile, gpus: list[str]) -> list[str]:
    """Refuse what cannot be probed here; notes about the device (one line each)."""
    if not gpus:
        raise InvalidRequestError(NO_GPU_MESSAGE)
    cluster = plan.cluster
    if cluster.num_nodes > 1:
        raise InvalidRequestError(
            f"probe runs on one node, the plan spans {cluster.num_nodes}: probe a one-node plan "
            "(autotune plan ... --num-nodes 1 -o probe.yaml) and calibrate from it"
        )
    found = machine_gpus(gpus, catalog_gpu)
    few = too_few_gpus(cluster, found)
    if few:
        raise InvalidRequestError(few)
    if found.spec is None:
        return [f"this machine's GPU '{found.name}' is not in the catalog: the runs calibrate {cluster.gpu}"]
    if found.spec.key != cluster.gpu:
        return [
            f"the plan is for {cluster.gpu}, this machine has {found.spec.key}: the runs calibrate {found.spec.key}"
        ]
    return []


def _moved_table(plan: PlanFile, before: Estimate, after: Estimate, measured: dict[str, float | None]) -> Table:
    table = Table(title=f"The plan's prediction ({plan.setting.short()})", title_justify="left")
    for column in ("quantity", "before", "after", "measured"):
        table.add_column(column, justify="left" if column == "quantity" else "right")

    def cell(value: float | None, unit: str) -> str:
        return "—" if value is None else f"{value:.3g} {unit}"

    table.add_row(
        "peak allocated",
        cell(before.peak_memory_gib, "GiB"),
        cell(after.peak_memory_gib, "GiB"),
        cell(measured.get("memory"), "GiB"),
    )
    table.add_row(
        "micro-step",
        cell(before.micro_step_time_s, "s"),
        cell(after.micro_step_time_s, "s"),
        cell(measured.get("micro"), "s"),
    )
    table.add_row(
        "optimizer step", cell(before.step_time_s, "s"), cell(after.step_time_s, "s"), cell(measured.get("step"), "s")
    )
    table.add_row("fits", "yes" if before.fits else "no", "yes" if after.fits else "no", "")
    return table


def probe(
    plan_path: Path,
    dataset: str,
    *,
    steps: int = 10,
    neighbours: bool = True,
    output: Path | None = None,
    with_seeds: bool = False,
    name: str | None = None,
    calibration: Path | None = None,
    runs_dir: Path | None = None,
    detector: GpuDetector | None = None,
    runner: ProbeRunner | None = None,
) -> Path:
    """Probe the plan and its neighbours, recalibrate, print the result; returns the calibration file.

    Raises:
        InvalidRequestError: no GPU (one line saying what to do instead), a multi-node plan, too few GPUs.
        ConfigError: the plan is invalid, the output calibration exists, or no run measured anything.
    """
    plan = load_plan(plan_path)
    target = resolve_output(output)
    for note in _check_machine(plan, (detector or detect_gpus)()):
        console().print(f"[yellow]note:[/] {note}")
    start, _ = coefficients_from_option(calibration)  # what the refit starts from ("before" in the table)
    # the neighbours are predicted like the plan itself: with the plan's calibration (fails loudly if missing)
    plans = [plan, *(neighbour_plans(plan, plan_coefficients(plan)) if neighbours else [])]
    local = Path(dataset).expanduser()
    dataset = str(local.absolute()) if local.exists() else dataset
    base = runs_dir if runs_dir is not None else Path(tempfile.mkdtemp(prefix="autotune-probe-"))
    try:
        run_dirs = []
        for index, probed in enumerate(plans):
            s = probed.setting
            out = base / f"probe-{index}-mbs{s.micro_batch_size}-ga{s.grad_accum}"
            options = LaunchOptions(
                dataset=dataset, output_dir=str(out.absolute()), max_steps=steps, save_steps=steps + 1, logging_steps=1
            )
            console().print(f"[bold]probe {index + 1}/{len(plans)}:[/] {s.short()} ({steps} steps) → {out}")
            code = (runner or launch_run)(build_launch_spec(probed, options), out)
            if (out / RUN_REPORT_FILE).is_file():
                run_dirs.append(out)
            else:
                console().print(f"[yellow]skipped:[/] {out}: exit code {code} and no {RUN_REPORT_FILE}")
        collected = collect(run_dirs, load_plan)
        print_collected(collected)
        result, _ = fit_and_write(collected, target, with_seeds=with_seeds, name=name, start_file=calibration)
    finally:
        if runs_dir is None:
            shutil.rmtree(base, ignore_errors=True)
    render_recalibration(result, target, start=start)
    print_moved(plan, collected, result, start)
    return target


def print_moved(plan: PlanFile, collected: Collected, result: Recalibration, start: CostCoefficients) -> None:
    """The plan's prediction before and after the refit, beside what its own probe run measured."""
    gpu_key = next((c.measurement.gpu for c in collected.cases), plan.cluster.gpu)
    cluster = ClusterSpec(
        gpu=resolve_gpu(gpu_key)[0],
        num_gpus_per_node=plan.cluster.num_gpus_per_node,
        host_memory_gib_per_node=plan.cluster.host_memory_gib_per_node,
    )
    planned = next((r.case.measurement for r in result.after if r.case.measurement.setting == plan.setting), None)
    measured = (
        {}
        if planned is None
        else {"memory": planned.peak_memory_gib, "micro": planned.micro_step_time_s, "step": planned.step_time_s}
    )
    before = estimate_setting(plan.model, cluster, plan.workload, plan.setting, start)
    after = estimate_setting(plan.model, cluster, plan.workload, plan.setting, result.coefficients)
    console().print(_moved_table(plan, before, after, measured))


def probe_command(
    plan_file: Annotated[Path, typer.Argument(metavar="PLAN.yaml", help="A plan written by autotune plan -o.")],
    dataset: Annotated[str, typer.Option("--dataset", help=LaunchOptions.model_fields["dataset"].description)],
    steps: Annotated[int, typer.Option("--steps", min=3, help="Optimizer steps per probe run.")] = 10,
    neighbours: Annotated[
        bool, typer.Option("--neighbours/--no-neighbours", help="Also probe micro batch ×2 and ÷2.")
    ] = True,
    output: OutputOpt = None,
    with_seeds: SeedsOpt = False,
    name: NameOpt = None,
    calibration: StartOpt = None,
    runs_dir: Annotated[
        Path | None, typer.Option("--runs-dir", help="Keep the probe runs here (default: a temporary dir).")
    ] = None,
) -> None:
    """Run a few real steps of a plan (and its neighbours) on this machine's GPU, then recalibrate."""
    probe(
        plan_file,
        dataset,
        steps=steps,
        neighbours=neighbours,
        output=output,
        with_seeds=with_seeds,
        name=name,
        calibration=calibration,
        runs_dir=runs_dir,
    )
