"""Plan several GPU types and counts at once and choose among them by time or money (``autotune plan --gpu a,b``).

Every cell (GPU type × GPUs per node) is planned exactly as a single ``autotune plan`` (:func:`search`); a cell
where nothing fits, or whose request is refused, stays a row that says why. The rows are then compared by one rule
(:func:`row_key`), after the limits (:func:`within_limits`: ``--deadline``, ``--budget``).

Objectives (one ``--objective`` for both stages):

* inside a cell the planner's own objectives apply unchanged (quality, speed, memory: :mod:`autotune.planner.search`);
  ``time`` and ``cost`` choose the setting by ``speed``: with one GPU type and count, cost = time × GPUs × price,
  so the fastest setting is also the cheapest;
* across cells, ``time`` (and ``speed``) takes the shortest run, ``cost`` the cheapest (rows without a price cannot
  be chosen by cost); ``quality`` the row whose setting the quality order prefers (full > LoRA > QLoRA), then the
  shortest run; ``memory`` the lowest peak, then the shortest run. Ties go to the fewer GPU-hours.

Under ``time`` and ``cost`` a difference inside the model's own uncertainty is no difference (:func:`break_tie`):
each row's run time and cost span value × (1 ± its ``Estimate.time_uncertainty_fraction``, the ± band the plan prints
on the micro-step; cost is time × GPUs × price, so it carries the same relative band). The rows whose span overlaps
the leader's are a tie, broken by the other objective: cost ties go to the faster row, time ties to the cheaper one;
the tie is said in one line (:meth:`Tie.line`). When the choice lands on a lower-quality method than another row or
runner-up offered and the user did not ask for a method, :func:`method_note` names it with its quality note.

Run time is the whole run (dataset × epochs) when the workload is given, else ``DEFAULT_RUN_STEPS`` optimizer steps
(:func:`autotune.planner.search.run_time_s`): the same number of tokens in every row, so time and cost compare alike;
without a workload the table shows cost per million training tokens instead of the run's cost.
"""

from __future__ import annotations

from dataclasses import dataclass

from autotune.errors import AutotuneError, InfeasibleError, InvalidRequestError, first_line
from autotune.planner.request import PlanRequest
from autotune.planner.search import METHOD_QUALITY_ORDER, PlanResult, search
from autotune.schemas.objective import GridObjective, Objective

SECONDS_PER_HOUR = 3600.0
TOKENS_PER_MILLION = 1e6


def setting_objective(objective: GridObjective) -> Objective:
    """The planner objective that chooses the setting inside one cell: ``time`` and ``cost`` -> ``speed``."""
    if objective == "time" or objective == "cost":
        return "speed"
    return objective


@dataclass(frozen=True)
class GridRow:
    """One GPU type × count: its plan (or why there is none) and its price.

    ``price_per_gpu_hour``: currency units per GPU-hour, None when no price is known.
    """

    gpu: str
    num_gpus: int
    num_nodes: int
    price_per_gpu_hour: float | None
    request: PlanRequest | None = None
    result: PlanResult | None = None
    error: str | None = None

    @property
    def world_size(self) -> int:
        """GPUs in all: per node × nodes."""
        return self.num_gpus * self.num_nodes

    @property
    def fits(self) -> bool:
        """Whether a setting was found."""
        return self.result is not None

    @property
    def run_time_s(self) -> float | None:
        """Seconds of the whole run (or of ``DEFAULT_RUN_STEPS`` steps without a workload); None without a plan."""
        return self.result.best.run_time_s if self.result else None

    @property
    def gpu_hours(self) -> float | None:
        """GPU-hours of the run: world size × run time / 3600 s."""
        run = self.run_time_s
        return None if run is None else self.world_size * run / SECONDS_PER_HOUR

    @property
    def cost(self) -> float | None:
        """The run's cost: GPU-hours × price per GPU-hour; None without a plan or a price."""
        hours = self.gpu_hours
        if hours is None or self.price_per_gpu_hour is None:
            return None
        return hours * self.price_per_gpu_hour

    @property
    def tokens_per_s(self) -> float | None:
        """Training tokens per second over all GPUs of the chosen setting."""
        return self.result.best.estimate.tokens_per_s if self.result else None

    @property
    def cost_per_million_tokens(self) -> float | None:
        """Price × world size / 3600 / tokens per second × 10^6: the cost of a million training tokens."""
        tokens = self.tokens_per_s
        if tokens is None or self.price_per_gpu_hour is None or tokens <= 0:
            return None
        return self.price_per_gpu_hour * self.world_size / SECONDS_PER_HOUR / tokens * TOKENS_PER_MILLION

    @property
    def label(self) -> str:
        """``'8× h100-80gb'`` (``'2×8× h100-80gb'`` over nodes)."""
        nodes = f"{self.num_nodes}×" if self.num_nodes > 1 else ""
        return f"{nodes}{self.num_gpus}× {self.gpu}"


def plan_row(
    gpu: str, num_gpus: int, num_nodes: int, price: float | None, request: PlanRequest | AutotuneError
) -> GridRow:
    """Plan one cell; a refused request or nothing fitting becomes a row with the one-line reason.

    The rows are compared at one global batch (their run times are of the same steps without a dataset size): the
    request's is kept even where the user left it unstated (``planner.batch_choice`` applies to one plan only).
    """
    row = GridRow(gpu=gpu, num_gpus=num_gpus, num_nodes=num_nodes, price_per_gpu_hour=price)
    if isinstance(request, AutotuneError):
        return GridRow(**{**row.__dict__, "error": first_line(request)})
    request = request.model_copy(update={"global_batch_stated": True})
    try:
        result = search(request)
    except AutotuneError as error:
        return GridRow(**{**row.__dict__, "request": request, "error": first_line(error)})
    return GridRow(**{**row.__dict__, "request": request, "result": result})


def row_key(row: GridRow, objective: GridObjective) -> tuple[float, ...]:
    """The order of fitting rows under an objective (smaller is better); see the module docstring."""
    assert row.result is not None and row.run_time_s is not None and row.gpu_hours is not None
    run, hours = row.run_time_s, row.gpu_hours
    if objective == "cost":
        return (float("inf") if row.cost is None else row.cost, run, hours)
    if objective == "quality":
        return (METHOD_QUALITY_ORDER[row.result.best.setting.method], run, hours)
    if objective == "memory":
        return (row.result.best.estimate.peak_memory_gib, run, hours)
    return (run, hours)


def within_limits(row: GridRow, deadline_s: float | None, budget: float | None) -> bool:
    """Whether a fitting row meets the deadline (run time ≤ seconds) and the budget (cost ≤ budget).

    Under a budget a row without a price does not qualify: its cost is unknown.
    """
    if deadline_s is not None and (row.run_time_s is None or row.run_time_s > deadline_s):
        return False
    return budget is None or (row.cost is not None and row.cost <= budget)


def choose_row(
    rows: list[GridRow],
    objective: GridObjective,
    *,
    deadline_s: float | None = None,
    budget: float | None = None,
    currency: str = "USD",
) -> GridRow:
    """The chosen row of :func:`choose` (the best fitting row under the limits, ties broken)."""
    return choose(rows, objective, deadline_s=deadline_s, budget=budget, currency=currency).chosen


def choose(
    rows: list[GridRow],
    objective: GridObjective,
    *,
    deadline_s: float | None = None,
    budget: float | None = None,
    currency: str = "USD",
) -> Tie:
    """The best fitting row under the limits by :func:`row_key`, a tie inside the band broken (:func:`break_tie`).

    Raises:
        InfeasibleError: no row fits; none meets the deadline (names the fastest row and its time); none meets
            the budget (names the cheapest priced row and its cost); ``cost`` with no priced row.
    """
    fitting = [row for row in rows if row.fits]
    if not fitting:
        raise InfeasibleError("nothing fits on any GPU type × count: " + "; ".join(_row_reasons(rows)))
    if deadline_s is not None:
        fastest = min(fitting, key=lambda row: row_key(row, "time"))
        if not any(within_limits(row, deadline_s, None) for row in fitting):
            raise InfeasibleError(
                f"no row meets --deadline {format_duration(deadline_s)}: the fastest is {fastest.label} at "
                f"{format_duration(fastest.run_time_s or 0.0)}; allow more time or add GPUs"
            )
    if budget is not None:
        priced = [row for row in fitting if row.cost is not None and within_limits(row, deadline_s, None)]
        if not priced:
            raise InfeasibleError(
                f"no row meets --budget {budget:g} {currency}: no row that fits"
                + (" the deadline" if deadline_s is not None else "")
                + " has a price (give one with --price GPU=PRICE)"
            )
        if not any(within_limits(row, deadline_s, budget) for row in priced):
            cheapest = min(priced, key=lambda row: row_key(row, "cost"))
            raise InfeasibleError(
                f"no row meets --budget {budget:g} {currency}"
                + (f" within --deadline {format_duration(deadline_s)}" if deadline_s is not None else "")
                + f": the cheapest is {cheapest.label} at {cheapest.cost:,.2f} {currency}"
            )
    eligible = [row for row in fitting if within_limits(row, deadline_s, budget)]
    if objective == "cost" and not any(row.cost is not None for row in eligible):
        raise InfeasibleError(
            "--objective cost: no fitting row has a price; give one with --price GPU=PRICE or use --objective time"
        )
    return break_tie(eligible, objective)


TIE_BREAKERS: dict[str, GridObjective] = {"cost": "time", "time": "cost"}
"""The objective that breaks a tie of the one asked: cost ties go to the faster row, time ties to the cheaper."""


@dataclass(frozen=True)
class Tie:
    """The outcome of the choice under ``objective``.

    ``leader``: the best row by the objective alone; ``tied``: the rows whose ranges overlap the leader's (the leader
    itself included); ``chosen``: the leader when nothing ties, else the best tied row by :data:`TIE_BREAKERS`.
    """

    objective: GridObjective
    leader: GridRow
    tied: tuple[GridRow, ...]
    chosen: GridRow

    @property
    def broken(self) -> bool:
        """Whether other rows tied with the leader (the tie rule decided)."""
        return len(self.tied) > 1

    def line(self, currency: str = "USD") -> str:
        """One line: the rows whose ranges overlap under the objective, the rule, and the row it chose."""
        spans = ", ".join(f"{row.label} {_span_text(row, self.objective, currency)}" for row in self.tied)
        rule = "cost ties go to the faster row" if self.objective == "cost" else "time ties go to the cheaper row"
        verdict = (
            f"{self.chosen.label} stays"
            if self.chosen is self.leader
            else f"{self.chosen.label} instead of {self.leader.label}"
        )
        return f"tie: the {self.objective} ranges overlap within the model's ± band ({spans}); {rule}: {verdict}"


def row_span(row: GridRow, objective: GridObjective) -> tuple[float, float]:
    """The range of a fitting row's run time (``time``) or cost (``cost``): value ÷ (1 + b) to value × (1 + b).

    b is the chosen setting's ``Estimate.time_uncertainty_fraction`` (the ``± %`` the plan prints on the micro-step,
    from held-out residuals: ``autotune.costmodel.calibration.error_band``, widened where the answer is
    extrapolated: ``autotune.costmodel.evidence``). The error is a ratio (measured / predicted), so the range is
    symmetric in log space: a band of 107 % spans ÷2.07 to ×2.07, never a cost of 0 (1 − b would go below zero past
    100 %); for a band of a few per cent it is 1 ± b. Cost = GPU-hours × price scales the time, so it carries the
    same relative band. A row without the value spans nothing (inf, inf).
    """
    assert row.result is not None
    value = row.cost if objective == "cost" else row.run_time_s
    if value is None:
        return (float("inf"), float("inf"))
    band = row.result.best.estimate.time_uncertainty_fraction
    return (value / (1.0 + band), value * (1.0 + band))


def break_tie(eligible: list[GridRow], objective: GridObjective) -> Tie:
    """Choose among fitting rows within the limits: the best by :func:`row_key`, unless others tie with it.

    Under ``time`` and ``cost`` the rows whose :func:`row_span` overlaps the leader's are tied with it, and the tie
    goes to the best of them by the other objective (:data:`TIE_BREAKERS`, then ``row_key`` of the objective asked);
    other objectives are not banded (quality and memory are not predicted times). One rule: ``choose_row`` and the
    printed tie line both come from here.
    """
    leader = min(eligible, key=lambda row: row_key(row, objective))
    other = TIE_BREAKERS.get(objective)
    if other is None:
        return Tie(objective, leader, (leader,), leader)
    low, high = row_span(leader, objective)
    tied = tuple(row for row in eligible if row_span(row, objective)[0] <= high and row_span(row, objective)[1] >= low)
    if objective == "cost":
        tied = tuple(row for row in tied if row.cost is not None)
    chosen = min(tied, key=lambda row: (row_key(row, other), row_key(row, objective)))
    return Tie(objective, leader, tied, chosen)


def method_note(chosen: GridRow, eligible: list[GridRow], objective: GridObjective, method_given: bool) -> str | None:
    """The quality note when the choice took a lower-quality method than was on offer and no ``--method`` was given.

    On offer: another eligible row's setting or a runner-up of the chosen row (quality order
    :data:`autotune.planner.search.METHOD_QUALITY_ORDER`: full > LoRA > QLoRA). None when ``method_given`` or nothing
    better was on offer.
    """
    if method_given or chosen.result is None:
        return None
    method = chosen.result.best.setting.method
    offered = [row.result.best.setting.method for row in eligible if row.result is not None]
    offered += [alternative.setting.method for alternative in chosen.result.alternatives]
    better = sorted(
        {m for m in offered if METHOD_QUALITY_ORDER[m] < METHOD_QUALITY_ORDER[method]},
        key=METHOD_QUALITY_ORDER.__getitem__,
    )
    if not better:
        return None
    return (
        f"method: {method} was chosen for {objective}; you gave no --method and {' or '.join(better)} was on offer. "
        f"{METHOD_QUALITY_NOTES[method]}; --method {better[-1]} plans with it instead"
    )


METHOD_QUALITY_NOTES: dict[str, str] = {
    "full": "full fine-tuning trains every weight",
    "lora": "LoRA trains low-rank adapters on the frozen 16-bit weights (Hu et al. 2021: on par with full fine-tuning "
    "on their GLUE and GPT-3 tasks, not on every task)",
    "qlora": "QLoRA trains LoRA adapters on a base quantized to 4-bit NF4 (Dettmers et al. 2023 report it matching "
    "16-bit LoRA on their benchmarks; the quantized base is an approximation of the model)",
}
"""What each method gives up, one clause each (the planner's quality order, ``autotune.planner.search``)."""


def _span_text(row: GridRow, objective: GridObjective, currency: str) -> str:
    low, high = row_span(row, objective)
    if objective == "cost":
        return f"{low:,.2f}–{high:,.2f} {currency}"
    return f"{format_duration(low)}–{format_duration(high)}"


def _row_reasons(rows: list[GridRow]) -> list[str]:
    return [f"{row.label}: {row.error}" for row in rows[:3]] + ([f"… {len(rows) - 3} more"] if len(rows) > 3 else [])


DURATION_UNITS_S = {"s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}
"""``--deadline`` units: seconds, minutes, hours, days."""

MAX_DURATION_S = 10 * 365 * 86400.0
"""Longest ``--deadline``: ten years. A bound, not a judgement: no fine-tuning run is planned that long, and it keeps
the seconds finite (``1e306d`` would overflow to infinity)."""


def parse_duration_s(text: str, option: str = "--deadline") -> float:
    """``'12h'`` -> 43200.0: a positive number followed by a unit of :data:`DURATION_UNITS_S`.

    Raises:
        InvalidRequestError: no unit, an unknown unit, a number that is not positive and finite, or a time over
            :data:`MAX_DURATION_S`.
    """
    value = text.strip().lower()
    number = value.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = value[len(number) :]
    if unit not in DURATION_UNITS_S:
        raise InvalidRequestError(f"{option} {text!r}: give a number and a unit, s, m, h or d (e.g. {option} 12h)")
    try:
        amount = float(number)
    except ValueError:
        amount = -1.0
    if not 0 < amount < float("inf"):
        raise InvalidRequestError(f"{option} {text!r}: the time must be a positive number, e.g. {option} 12h")
    seconds = amount * DURATION_UNITS_S[unit]
    if seconds > MAX_DURATION_S:
        raise InvalidRequestError(
            f"{option} {text!r}: at most {MAX_DURATION_S / 86400:g}d (ten years), e.g. {option} 12h"
        )
    return seconds


def format_duration(seconds: float) -> str:
    """Seconds as a short human time: ``'45 min'``, ``'14.2 h'``, ``'3.1 d'``."""
    if seconds < SECONDS_PER_HOUR:
        return f"{seconds / 60:.0f} min"
    if seconds < 72 * SECONDS_PER_HOUR:
        return f"{seconds / SECONDS_PER_HOUR:.1f} h"
    return f"{seconds / 86400:.1f} d"
