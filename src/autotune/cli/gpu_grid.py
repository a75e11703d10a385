"""``autotune plan`` over several GPU types and counts: tell a table from one plan, write it, print it.

Entered from :mod:`autotune.cli.plan_cmd` when ``--gpu`` or ``--num-gpus`` is a list (or ``--gpu any``), or when an
option that only the table uses is given (``--objective time|cost``, ``--deadline``, ``--budget``, ``--price``).
A single ``--gpu X --num-gpus N`` without those is today's plan, unchanged. The table itself (its options validated,
every cell planned, the choice) is :mod:`autotune.session.gpu_grid`, shared with :func:`autotune.api.grid`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from autotune.cli.console import console
from autotune.errors import InvalidRequestError
from autotune.planner.grid import format_duration
from autotune.planner.search import DEFAULT_RUN_STEPS
from autotune.schemas.objective import TABLE_OBJECTIVES
from autotune.schemas.plan import PlanFile

if TYPE_CHECKING:  # the table's schema loads only when a table is asked
    from autotune.schemas.gpu_grid import GridReport, GridRowReport


def wants_grid(
    gpu: str, num_gpus: str, objective: str, deadline: str | None, budget: float | None, prices: list[str] | None
) -> bool:
    """Whether ``plan`` is asked for the table: a list of GPUs or counts, ``any``, or a table-only option."""
    lists = "," in gpu or "," in num_gpus or gpu.strip().lower() == "any"
    return lists or objective in TABLE_OBJECTIVES or deadline is not None or budget is not None or bool(prices)


def single_count(text: str) -> int:
    """One ``--num-gpus`` value as an integer; its range is checked with the request (the message of a single plan).

    Raises:
        InvalidRequestError: not an integer (the message typer gave when the option was typed ``int``).
    """
    try:
        return int(text.strip())
    except ValueError:
        raise InvalidRequestError(
            "Invalid value for '--num-gpus': Input should be a valid integer, unable to parse string as an integer"
        ) from None


def table_path(output: Path) -> Path:
    """Where ``-o plan.yaml`` writes the table beside the plan: ``plan.gpus.json``."""
    return output.with_name(output.stem + ".gpus.json")


def write_grid(report: GridReport, plan_file: PlanFile, output: Path) -> Path:
    """Write the chosen row's plan file to ``output`` and the table beside it (:func:`table_path`); return the latter.

    Both are refused before either is written when one exists.

    Raises:
        InvalidRequestError: either file exists.
        ConfigError: the directory is missing or a write failed.
    """
    from autotune.fileio import refuse_existing, write_atomic
    from autotune.schemas.plan_io import save_plan

    table = table_path(output)
    refuse_existing(output, table)
    save_plan(plan_file, output)
    write_atomic(table, report.model_dump_json(indent=2, exclude={"plan_file"}) + "\n", what="GPU table")
    return table


def _fits_text(row: GridRowReport, report: GridReport) -> str:
    """``yes``, ``no``, or why a fitting row is out: ``late`` (over ``--deadline``), ``over budget``."""
    if not row.fits:
        return "no"
    if row.meets_limits:
        return "yes"
    late = report.deadline_s is not None and (row.run_time_s or 0.0) > report.deadline_s
    return "late" if late else "over budget"


def band_text(row: GridRowReport) -> str:
    """The row's ± time band ('57%'), starred when extrapolated from the datasheet; '–' without a plan."""
    if row.time_uncertainty_fraction is None:
        return "–"
    return f"{row.time_uncertainty_fraction:.0%}" + ("*" if row.evidence == "extrapolated" else "")


def render_grid(report: GridReport, elapsed_s: float) -> None:
    """Print the table (one row per GPU type × count, the chosen one marked), the choice and the prices used."""
    from rich.markup import escape

    from autotune.cli.tables import Column, print_table

    money = report.currency
    cost_header = f"cost {money}" if report.whole_run else f"{money}/M tokens"
    time_header = "run time" if report.whole_run else f"{DEFAULT_RUN_STEPS} steps"
    columns = [
        Column(""),
        Column("GPUs"),
        Column("fits"),
        Column("tokens/s", "right"),
        Column(time_header, "right"),
        Column("±", "right", drop_order=3),
        Column("GPU-h", "right", drop_order=2),
        Column(cost_header, "right"),
        Column("setting / why not", drop_order=1, wrap=True),
    ]
    table_rows = []
    for row in report.rows:
        label = f"{row.num_nodes}×{row.num_gpus}× {row.gpu}" if row.num_nodes > 1 else f"{row.num_gpus}× {row.gpu}"
        money_value = row.cost if report.whole_run else row.cost_per_million_tokens
        fits = _fits_text(row, report)
        table_rows.append(
            [
                "→" if row.chosen else "",
                label,
                fits,
                f"{row.tokens_per_s:,.0f}" if row.tokens_per_s is not None else "–",
                format_duration(row.run_time_s) if row.run_time_s is not None else "–",
                band_text(row),
                f"{row.gpu_hours:,.1f}" if row.gpu_hours is not None else "–",
                (f"{money_value:,.2f}" if report.whole_run else f"{money_value:.3f}")
                if money_value is not None
                else "–",
                escape(row.setting or row.note or ""),
            ]
        )
    limits = []
    if report.deadline_s is not None:
        limits.append(f"deadline {format_duration(report.deadline_s)}")
    if report.budget is not None:
        limits.append(f"budget {report.budget:g} {money}")
    title = f"Best setting per GPU type × count (objective {report.objective}" + (
        f", {', '.join(limits)})" if limits else ")"
    )
    print_table(escape(title), columns, table_rows)
    out = console()
    chosen = report.chosen
    out.print(
        f"[bold]chosen:[/] {chosen.num_gpus}× {escape(chosen.gpu)}, {escape(chosen.setting or '')}",
        soft_wrap=True,
    )
    for note in report.notes:
        out.print(note, soft_wrap=True, markup=False)
    out.print(escape(report.prices), soft_wrap=True, markup=False)
    for row in report.rows:
        if row.fits and row.price_per_gpu_hour is None:
            out.print(f"note: {escape(row.note or '')}", soft_wrap=True)
    if any(row.evidence == "extrapolated" for row in report.rows):
        out.print(
            "* extrapolated from the datasheet: no timed run of that card × method × sharding backs the row; its "
            "band is the wider one (autotune plan on the row prints the evidence)",
            soft_wrap=True,
        )
    if not report.whole_run:
        out.print(
            "no workload given: times are for 1000 optimizer steps; --num-samples or --dataset-tokens for the run"
        )
    out.print(f"[dim]planned {len(report.rows)} GPU type × count cells in {elapsed_s:.1f} s[/]")
