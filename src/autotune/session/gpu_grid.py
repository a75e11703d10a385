"""The table of GPU types × counts: validate its options, plan every cell, choose one, as a typed report.

``autotune plan`` with a list of GPUs or counts (or ``--gpu any``, ``--objective time|cost``, ``--deadline``,
``--budget``, ``--price``) and :func:`autotune.api.grid` both come here after :func:`autotune.session.plan_one.prepare`
(the dataset tokenized once, for every cell), so the table they give is the same. The planning of a cell and the choice
are :mod:`autotune.planner.grid`; the prices :mod:`autotune.profiles.prices`; the command line renders the report
(:mod:`autotune.cli.gpu_grid`). Nothing here prints or writes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from autotune.errors import AutotuneError, InvalidRequestError
from autotune.planner.build import build_plan_file
from autotune.planner.grid import (
    GridRow,
    Tie,
    choose,
    method_note,
    parse_duration_s,
    plan_row,
    setting_objective,
    within_limits,
)
from autotune.planner.request import PlanRequest
from autotune.profiles.catalog import current_gpus, resolve_gpu
from autotune.schemas.objective import GRID_OBJECTIVES, GridObjective
from autotune.schemas.plan import PlanFile
from autotune.session.option_groups import GridOptions
from autotune.session.planning import PlanOptions, request_from_options
from autotune.session.resolve import num_samples_note

if TYPE_CHECKING:  # the price table (and PyYAML with it) and the table's schema load only when a table is asked
    from autotune.profiles.prices import Prices
    from autotune.schemas.gpu_grid import GridReport, GridRowReport

MAX_CELLS = 256
"""At most this many GPU type × count cells in one plan (each is a whole plan)."""


def parse_gpu_list(text: str) -> list[str]:
    """``'4090,a100-80gb,h100'`` -> catalog keys in order, duplicates dropped; ``'any'`` -> the current cards.

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


@dataclass(frozen=True)
class GridAsk:
    """What the table is asked, validated: GPU keys, counts, objective, limits (seconds, currency) and prices."""

    gpus: list[str]
    counts: list[int]
    objective: GridObjective
    deadline_s: float | None
    budget: float | None
    prices: Prices


def grid_ask(base: PlanOptions, num_gpus: str, table: GridOptions) -> GridAsk:
    """Validate the table's options before anything is planned or written.

    ``base.gpu``: a comma list of GPU names or ``any``; ``num_gpus``: a comma list of GPUs per node.

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
    deadline_s = None if table.deadline is None else parse_duration_s(table.deadline)
    budget = table.budget
    if budget is not None and not 0 < budget < float("inf"):
        raise InvalidRequestError(f"--budget {budget:g}: the budget must be a positive amount, e.g. --budget 200")
    if (deadline_s is not None or budget is not None) and base.num_samples is None and base.dataset_tokens is None:
        raise InvalidRequestError(
            "--deadline and --budget need the run's size: give --num-samples or --dataset-tokens (with --epochs)"
        )
    from autotune.profiles.prices import resolve_prices

    prices = resolve_prices(table.price)
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
    best = row.result.best if row.result else None
    return GridRowReport(
        gpu=row.gpu,
        num_gpus=row.num_gpus,
        num_nodes=row.num_nodes,
        fits=row.fits,
        setting=best.setting.short() if best else None,
        tokens_per_s=row.tokens_per_s,
        run_time_s=row.run_time_s,
        gpu_hours=row.gpu_hours,
        price_per_gpu_hour=row.price_per_gpu_hour,
        price_source=ask.prices.sources.get(row.gpu) if row.price_per_gpu_hour is not None else None,
        cost=row.cost,
        cost_per_million_tokens=row.cost_per_million_tokens,
        band=best.estimate.time_uncertainty_fraction if best else None,
        meets_limits=row.fits and within_limits(row, ask.deadline_s, ask.budget),
        chosen=chosen,
        note=note,
        time_uncertainty_fraction=best.estimate.time_uncertainty_fraction if best else None,
        evidence=best.estimate.evidence if best else None,
    )


@dataclass(frozen=True)
class GridOutcome:
    """The table of GPU types × counts: the report (every row, the chosen one, the notes) and the chosen plan file."""

    report: GridReport
    plan_file: PlanFile

    def json_dict(self) -> dict[str, Any]:
        """What ``autotune plan --gpu A,B ... --json`` prints: the report, the chosen row's plan file included."""
        return self.report.model_dump(mode="json")


def run_grid(base: PlanOptions, ask: GridAsk) -> GridOutcome:
    """Plan every cell and choose: the report and the chosen row's plan file.

    Raises:
        InfeasibleError: nothing fits anywhere, or no row meets the deadline / budget (one line with the numbers).
    """
    rows = plan_grid(base, ask)
    tie = choose(rows, ask.objective, deadline_s=ask.deadline_s, budget=ask.budget, currency=ask.prices.currency)
    chosen = tie.chosen
    assert chosen.request is not None and chosen.result is not None
    plan_file = build_plan_file(chosen.request, chosen.result)
    eligible = [row for row in rows if row.fits and within_limits(row, ask.deadline_s, ask.budget)]
    notes = [method_note(chosen, eligible, ask.objective, base.setting.method is not None)]
    notes.append(num_samples_note(base.num_samples, base.seq_len, base.batches is not None))
    return GridOutcome(grid_report(rows, tie, ask, plan_file, [note for note in notes if note]), plan_file)


def plan_table(prepared: PlanOptions, num_gpus: str, table: GridOptions) -> GridOutcome:
    """The table for ``prepared`` (options through :func:`autotune.session.plan_one.prepare`): validated, planned.

    Raises:
        AutotuneError: what :func:`grid_ask` refuses (before any cell is planned), and what :func:`run_grid` does.
    """
    return run_grid(prepared, grid_ask(prepared, num_gpus, table))
