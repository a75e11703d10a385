"""``autotune sweep``: the feasibility / throughput map of each method over sequence lengths.

With ``--dataset`` each cell is priced on the data's workload at its ``seq_len``, by plan's path
(:func:`autotune.session.dataset_lengths.dataset_workload` and ``with_packing``; ``--packing auto`` keeps the layout
with the faster whole run, :func:`autotune.planner.sweep.plan_layouts`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from autotune.cli import options as opt
from autotune.cli.console import console
from autotune.cli.render import print_json
from autotune.cli.setting_options import takes_setting_options
from autotune.errors import InvalidRequestError
from autotune.planner.sweep import SweepCell, SweepResult, sweep
from autotune.session.calibration_choice import calibration_file
from autotune.session.dataset_lengths import check_packing
from autotune.session.option_groups import (
    DEFAULT_NODES,
    DEFAULT_SIZE,
    NO_DATASET,
    DatasetOptions,
    NodeOptions,
    SizeOptions,
)
from autotune.session.planning import PlanOptions
from autotune.session.setting_options import NOT_GIVEN, SettingOptions
from autotune.session.sweeping import SweepRequests

METHODS = ("full", "lora", "qlora")
DEFAULT_SEQ_LENS = "512,1024,2048,4096,8192"
MAX_SWEEP_POINTS = 64
"""Most sequence lengths one sweep plans (each is a full plan per method: ~0.1-1 s)."""
_MAX_DIGITS = 9


def parse_int_list(value: str, option: str) -> list[int]:
    """'512,1024, 2048' → [512, 1024, 2048].

    Raises:
        InvalidRequestError: an empty list, an empty item, or an item that is not a positive integer.
    """
    items = [item.strip() for item in value.split(",")]
    if not any(items):
        raise InvalidRequestError(f"{option}: give a comma-separated list of positive integers, e.g. 512,1024")
    numbers = []
    for item in items:
        if not item.isdigit() or len(item) > _MAX_DIGITS or int(item) <= 0:
            raise InvalidRequestError(
                f"{option}: {item!r} is not a positive integer (give e.g. 512,1024,2048; got {value!r})"
            )
        numbers.append(int(item))
    if len(set(numbers)) > MAX_SWEEP_POINTS:
        raise InvalidRequestError(
            f"{option}: {len(set(numbers))} values; a sweep plans at most {MAX_SWEEP_POINTS} (split it into several)"
        )
    return numbers


def sweep_with_progress(make_request: Any, methods: list[str], seq_lens: list[int]) -> SweepResult:
    """Run the sweep with a progress bar on stderr (a terminal only; nothing in pipes or --json output)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    stderr = Console(stderr=True)
    if not stderr.is_terminal:
        return sweep(make_request, methods, seq_lens)
    columns = (TextColumn("planning"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=stderr, transient=True) as progress:
        task = progress.add_task("sweep", total=len(methods) * len(set(seq_lens)))
        return sweep(make_request, methods, seq_lens, on_cell=lambda: progress.advance(task))


def parse_methods(value: str) -> list[str]:
    """'full,lora' → ['full', 'lora'] (order kept, duplicates dropped).

    Raises:
        InvalidRequestError: an empty list or a name other than full, lora, qlora.
    """
    items = [item.strip() for item in value.split(",")]
    bad = [item for item in items if item not in METHODS]
    if bad or not items:
        raise InvalidRequestError(f"--methods: {bad[0] if bad else value!r} is not one of {', '.join(METHODS)}")
    return list(dict.fromkeys(items))


def _cell_text(cell: SweepCell) -> str:
    if cell.estimate is not None and cell.setting is not None:
        e = cell.estimate
        return f"[green]✓[/] {e.peak_memory_gib:.1f} GiB · {e.tokens_per_s:,.0f} tok/s\n[dim]{cell.setting.short()}[/]"
    mark = "[yellow]–[/]" if cell.status == "unsupported" else "[red]✗[/]"
    return f"{mark} {cell.short_reason}"


def sweep_table(result: SweepResult) -> Table:
    """Rows = sequence lengths, columns = methods; each cell: peak memory, tokens/s and setting, or why not."""
    table = Table(
        title=(
            f"{result.model} on {result.world_size}× {result.gpu} ({result.gpu_memory_gib:.0f} GiB), "
            f"global batch {result.global_batch_size}, objective {result.objective}"
        ),
        title_justify="left",
        show_lines=True,
    )
    table.add_column("seq_len", justify="right", style="cyan")
    for method in result.methods:
        table.add_column(method)
    for seq_len in result.seq_lens:
        table.add_row(str(seq_len), *(_cell_text(result.cell(m, seq_len)) for m in result.methods))
    return table


@takes_setting_options(stated=False, leave_out=("method",))
def sweep_command(
    model: opt.ModelArg,
    gpu: opt.GpuOpt,
    num_gpus: opt.NumGpusOpt = 1,
    nodes: NodeOptions = DEFAULT_NODES,
    seq_len: Annotated[
        str, typer.Option("--seq-len", help="Comma-separated sequence lengths (tokens) to plan for.")
    ] = DEFAULT_SEQ_LENS,
    global_batch_size: opt.GlobalBatchOpt = 32,
    methods: Annotated[
        str, typer.Option("--methods", help="Comma-separated methods to force, from full, lora, qlora.")
    ] = ",".join(METHODS),
    objective: opt.ObjectiveOpt = "quality",
    setting: SettingOptions = NOT_GIVEN,
    size: SizeOptions = DEFAULT_SIZE,
    data: DatasetOptions = NO_DATASET,
    calibration: opt.CalibrationOpt = None,
    plot: Annotated[
        Path | None, typer.Option("--plot", help="Also draw tokens/s and peak memory vs seq_len to this PNG.")
    ] = None,
    json_: opt.JsonOpt = False,
) -> None:
    """Plan MODEL for each method × sequence length: what fits, how fast, or why not."""
    seq_lens = parse_int_list(seq_len, "--seq-len")
    chosen = parse_methods(methods)
    adapter_options = setting.overrides().adapter_options()
    if adapter_options and chosen == ["full"]:
        flags = ", ".join("--" + name.replace("_", "-") for name in adapter_options)
        raise InvalidRequestError(f"{flags}: LoRA options, and --methods full trains no adapter; add lora or qlora")
    if plot is not None:
        from autotune.cli.plots import check_plot_path

        check_plot_path(plot)  # fail before any work
    options = PlanOptions.from_groups(
        model=model, gpu=gpu, num_gpus=num_gpus, nodes=nodes, size=size, data=data, setting=setting,
        global_batch_size=global_batch_size, objective=objective,
        calibration=calibration_file(calibration),  # its note once, not once per cell
    )  # fmt: skip
    check_packing(data.packing, data.dataset)
    requests = SweepRequests(options)
    result = sweep_with_progress(requests, chosen, seq_lens)
    notes = requests.closing_notes(result)
    if plot is not None:
        from autotune.cli.plot_sweep import sweep_png

        sweep_png(result, plot)
    if json_:
        print_json({**result.as_dict(), "notes": notes, "plot": None if plot is None else str(plot)})
        return
    for note in notes:
        console().print(f"[yellow]note:[/] {note}")
    console().print(sweep_table(result))
    if plot is not None:
        console().print(f"[green]wrote[/] {plot}")
