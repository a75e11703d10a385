"""``autotune plan`` over several GPU types and counts: parse the lists and limits, plan every cell, print one table.

Entered from :mod:`autotune.cli.plan_cmd` when ``--gpu`` or ``--num-gpus`` is a list (or ``--gpu any``), or when an
option that only the table uses is given (``--objective time|cost``, ``--deadline``, ``--budget``, ``--price``).
A single ``--gpu X --num-gpus N`` without those is today's plan, unchanged. The planning and the choice are
:mod:`autotune.planner.grid`; the prices :mod:`autotune.profiles.prices`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from autotune.cli.console import console
from autotune.errors import AutotuneError, InvalidRequestError
from autotune.planner.build import build_plan_file
from autotune.planner.grid import (
    GRID_OBJECTIVES,
    GridObjective,
    GridRow,
    Tie,
    choose,
    format_duration,
    method_note,
    parse_duration_s,
    plan_row,
    setting_objective,
    within_limits,
)
from autotune.planner.request import PlanRequest
from autotune.planner.search import DEFAULT_RUN_STEPS
from autotune.profiles.catalog import current_gpus, resolve_gpu
from autotune.schemas.plan import PlanFile
from autotune.session.planning import PlanOptions, request_from_options

if TYPE_CHECKING:  # the price table (and PyYAML with it) and the table's schema load only when a table is asked
    from autotune.profiles.prices import Prices
    from autotune.schemas.gpu_grid import GridReport, GridRowReport

GRID_ONLY_OBJECTIVES = frozenset({"time", "cost"})
MAX_CELLS = 256
"""At most this many GPU type × count cells in one plan (each is a whole plan)."""


def wants_grid(
    gpu: str, num_gpus: str, objective: str, deadline: str | None, budget: float | None, prices: list[str] | None
) -> bool:
    """Whether ``plan`` is asked for the table: a list of GPUs or counts, ``any``, or a table-only option."""
    lists = "," in gpu or "," in num_gpus or gpu.strip().lower() == "any"
    return lists or objective in GRID_ONLY_OBJECTIVES or deadline is not None or budget is not None or bool(prices)


def parse_gpu_list(text: str) -> list[str]:
    """``'4090,a100-80gb,h100'`` -> catalog keys in order, duplicates dropped; ``'any'`` -> :data:`CURRENT_GPUS`.

    Raises:
        UnknownNameError: a name not in the catalog (the message names the closest).
        InvalidRequestError: an empty list.
    """
    if text.strip().lower() == "any":
        return [spec.key for spec in current_gpus()]
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names:
        raise InvalidRequestError(f"--gpu {text!r}: give GPU names separated by commas, or any")
    keys = [resolve_gpu(name)[0].key for name in names]
    return list(dict.fromkeys(keys))


def parse_count_list(text: str) -> list[int]:
    """``'1,2,4,8'`` -> ``[1, 2, 4, 8]`` (duplicates dropped).

    Raises:
        InvalidRequestError: an item that is not a whole number from 1 to 64.
    """
    counts = []
    for part in text.split(","):
        try:
            count = int(part.strip())
        except ValueError:
            count = 0
        if not 1 <= count <= 64:
            raise InvalidRequestError(f"--num-gpus {text!r}: give whole numbers of GPUs per node, 1 to 64, e.g. 1,2,8")
        counts.append(count)
    return list(dict.fromkeys(counts))


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


@dataclass(frozen=True)
class GridAsk:
    """What the table is asked, validated: GPU keys, counts, objective, limits and prices."""

    gpus: list[str]
    counts: list[int]
    objective: GridObjective
    deadline_s: float | None
    budget: float | None
    prices: Prices


def grid_ask(
    base: PlanOptions, num_gpus: str, deadline: str | None, budget: float | None, price: list[str] | None
) -> GridAsk:
    """Validate the table's options before anything is planned or written.

    Raises:
        AutotuneError: an unknown GPU, a bad count, objective, deadline, budget or price; a deadline or budget
            without a workload (one line).
    """
    if base.objective not in GRID_OBJECTIVES:
        raise InvalidRequestError(f"--objective {base.objective!r}: choose one of {', '.join(GRID_OBJECTIVES)}")
    gpus = parse_gpu_list(base.gpu)
    counts = parse_count_list(num_gpus)
    if len(gpus) * len(counts) > MAX_CELLS:
        raise InvalidRequestError(f"{len(gpus)} GPUs × {len(counts)} counts: at most {MAX_CELLS} cells in one plan")
    deadline_s = None if deadline is None else parse_duration_s(deadline)
    if budget is not None and not 0 < budget < float("inf"):
        raise InvalidRequestError(f"--budget {budget:g}: the budget must be a positive amount, e.g. --budget 200")
    if (deadline_s is not None or budget is not None) and base.num_samples is None and base.dataset_tokens is None:
        raise InvalidRequestError(
            "--deadline and --budget need the run's size: give --num-samples or --dataset-tokens (with --epochs)"
        )
    from autotune.profiles.prices import resolve_prices

    prices = resolve_prices(price)
    objective: GridObjective = base.objective  # type: ignore[assignment]  # checked against GRID_OBJECTIVES
    return GridAsk(gpus, counts, objective, deadline_s, budget, prices)


def plan_grid(base: PlanOptions, ask: GridAsk) -> list[GridRow]:
    """Plan every GPU type × count of ``ask`` with ``base``'s other options; one row each, in the order given.

    Raises:
        AutotuneError: every cell's request was refused with the same message (an unknown model, a bad setting
            option: nothing to do with the GPUs), raised as is instead of a table of identical rows.
    """
    rows = []
    refused: list[AutotuneError] = []
    inner = setting_objective(ask.objective)
    for gpu in ask.gpus:
        for count in ask.counts:
            options = replace(base, gpu=gpu, num_gpus=count, objective=inner)
            request: PlanRequest | AutotuneError
            try:
                request, _ = request_from_options(options)
            except AutotuneError as error:
                request = error
                refused.append(error)
            rows.append(plan_row(gpu, count, base.num_nodes, ask.prices.price(gpu), request))
    if len(refused) == len(rows) and len({str(error) for error in refused}) == 1:
        raise refused[0]
    return rows


def grid_report(
    rows: list[GridRow], tie: Tie, ask: GridAsk, plan_file: PlanFile, notes: list[str] | None = None
) -> GridReport:
    """The table as its schema (what ``--json`` prints); ``notes``: lines printed under it (the tie line first)."""
    from autotune.schemas.gpu_grid import GridReport

    chosen = tie.chosen
    whole_run = plan_file.workload.num_samples is not None or plan_file.workload.dataset_tokens is not None
    reports = [_row_report(row, row is chosen, ask) for row in rows]
    lines = [tie.line(ask.prices.currency)] if tie.broken else []
    return GridReport(
        objective=ask.objective,
        whole_run=whole_run,
        deadline_s=ask.deadline_s,
        budget=ask.budget,
        currency=ask.prices.currency,
        prices=ask.prices.describe(),
        rows=reports,
        chosen=reports[rows.index(chosen)],
        plan_file=plan_file.model_dump(mode="json"),
        notes=lines + list(notes or []),
    )


def _row_report(row: GridRow, chosen: bool, ask: GridAsk) -> GridRowReport:
    from autotune.schemas.gpu_grid import GridRowReport

    note = row.error
    if row.fits and row.price_per_gpu_hour is None:
        note = f"no price for {row.gpu}: time only (give one with --price {row.gpu}=PRICE)"
    return GridRowReport(
        gpu=row.gpu,
        num_gpus=row.num_gpus,
        num_nodes=row.num_nodes,
        fits=row.fits,
        setting=row.result.best.setting.short() if row.result else None,
        tokens_per_s=row.tokens_per_s,
        run_time_s=row.run_time_s,
        gpu_hours=row.gpu_hours,
        price_per_gpu_hour=row.price_per_gpu_hour,
        price_source=ask.prices.sources.get(row.gpu) if row.price_per_gpu_hour is not None else None,
        cost=row.cost,
        cost_per_million_tokens=row.cost_per_million_tokens,
        band=row.result.best.estimate.time_uncertainty_fraction if row.result else None,
        meets_limits=row.fits and within_limits(row, ask.deadline_s, ask.budget),
        chosen=chosen,
        note=note,
        time_uncertainty_fraction=row.result.best.estimate.time_uncertainty_fraction if row.result else None,
        evidence=row.result.best.estimate.evidence if row.result else None,
    )


def run_grid(base: PlanOptions, ask: GridAsk) -> tuple[GridReport, PlanFile]:
    """Plan every cell and choose: the report and the chosen row's plan file.

    Raises:
        InfeasibleError: nothing fits anywhere, or no row meets the deadline / budget (one line with the numbers).
    """
    from autotune.session.resolve import num_samples_note

    rows = plan_grid(base, ask)
    tie = choose(rows, ask.objective, deadline_s=ask.deadline_s, budget=ask.budget, currency=ask.prices.currency)
    chosen = tie.chosen
    assert chosen.request is not None and chosen.result is not None
    plan_file = build_plan_file(chosen.request, chosen.result)
    eligible = [row for row in rows if row.fits and within_limits(row, ask.deadline_s, ask.budget)]
    notes = [method_note(chosen, eligible, ask.objective, base.setting.method is not None)]
    notes.append(num_samples_note(base.num_samples, base.seq_len, base.batches is not None))
    return grid_report(rows, tie, ask, plan_file, [note for note in notes if note]), plan_file


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
    from autotune.fileio import write_atomic
    from autotune.schemas.plan_io import save_plan

    table = table_path(output)
    for path in (output, table):
        if path.exists():
            raise InvalidRequestError(f"{path} exists: choose another -o or remove it (nothing was written)")
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
