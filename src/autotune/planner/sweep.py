"""Feasibility / throughput map: the planner run once per (method, sequence length) with the method forced.

Each cell is the planner's answer for one method at one ``seq_len`` under the same hardware, global batch
and objective: the best setting with its predicted peak memory and tokens/s, or why nothing fits. For a
cell where nothing fits, the *closest* candidate is the one with the smallest overshoot, i.e. the largest
of (GPU memory need / GPU memory) and (host RAM need / host RAM), the same measure the planner's
``InfeasibleError`` message uses; its GPU memory need = peak allocated + CUDA context + headroom, the sum
that ``Estimate.fits`` compares with the GPU's memory.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from autotune.errors import InfeasibleError, InvalidRequestError
from autotune.planner.packing import choose_packing
from autotune.planner.refusals import closest_to_fitting
from autotune.planner.request import PlanRequest
from autotune.planner.search import evaluate_candidates, run_time_s, search
from autotune.schemas.dataset_stats import Packing
from autotune.schemas.estimate import Estimate
from autotune.schemas.setting import TrainingSetting

CellStatus = Literal["fits", "infeasible", "unsupported"]

CellRequest = PlanRequest | Mapping[Packing, PlanRequest]
"""One cell's request, or one per dataset layout (``sweep --dataset --packing auto``: the faster whole run is kept)."""

RequestFactory = Callable[[str, int], CellRequest]
"""Builds the validated request(s) for (method, seq_len); user errors (bad values) propagate."""


@dataclass(frozen=True)
class SweepCell:
    """The planner's answer for one method at one sequence length.

    ``status``: ``fits`` (``setting`` / ``estimate`` are the best fitting setting), ``infeasible`` (nothing
    fits; ``closest_*`` describe the candidate nearest to fitting, when there was any candidate) or
    ``unsupported`` (the GPU cannot run the method at all, e.g. QLoRA without bitsandbytes).
    ``reason`` is the planner's full message, ``short_reason`` a few words for a table cell;
    ``closest_short_of`` names what the closest candidate lacks: 'GPU memory' and/or 'host RAM'.
    """

    method: str
    seq_len: int
    status: CellStatus
    setting: TrainingSetting | None = None
    estimate: Estimate | None = None
    reason: str | None = None
    short_reason: str | None = None
    closest_setting: TrainingSetting | None = None
    closest_need_gib: float | None = None
    closest_short_of: tuple[str, ...] = ()
    packing: Packing | None = None
    """The dataset layout of the cell (``sweep --dataset``); None without a dataset."""

    @property
    def fits(self) -> bool:
        """Something fits for this method at this sequence length."""
        return self.status == "fits"

    def as_dict(self) -> dict[str, object]:
        """JSON-ready dict (GiB, seconds, tokens/s over all GPUs)."""
        e = self.estimate
        return {
            "method": self.method,
            "seq_len": self.seq_len,
            "status": self.status,
            "fits": self.fits,
            "setting": None if self.setting is None else self.setting.model_dump(mode="json"),
            "setting_short": None if self.setting is None else self.setting.short(),
            "peak_memory_gib": None if e is None else e.peak_memory_gib,
            "memory_uncertainty_gib": None if e is None else e.memory_uncertainty_gib,
            "gpu_memory_need_gib": None if e is None else e.gpu_memory_need_gib,
            "tokens_per_s": None if e is None else e.tokens_per_s,
            "step_time_s": None if e is None else e.step_time_s,
            "reason": self.reason,
            "short_reason": self.short_reason,
            "closest_setting_short": None if self.closest_setting is None else self.closest_setting.short(),
            "closest_need_gib": self.closest_need_gib,
            "closest_short_of": list(self.closest_short_of),
            "packing": self.packing,
            "total_time_s": None if e is None else e.total_time_s,
        }


@dataclass(frozen=True)
class SweepResult:
    """All cells of a sweep, in ``methods`` × ``seq_lens`` order, with the hardware they were planned for."""

    model: str
    gpu: str
    world_size: int
    gpu_memory_gib: float
    host_memory_gib_per_node: float | None
    global_batch_size: int
    objective: str
    methods: tuple[str, ...]
    seq_lens: tuple[int, ...]
    cells: tuple[SweepCell, ...]

    def cell(self, method: str, seq_len: int) -> SweepCell:
        """The cell of one method at one sequence length.

        Raises:
            KeyError: the pair was not swept.
        """
        for cell in self.cells:
            if cell.method == method and cell.seq_len == seq_len:
                return cell
        raise KeyError((method, seq_len))

    def for_method(self, method: str) -> list[SweepCell]:
        """The cells of one method, by increasing sequence length."""
        return [self.cell(method, seq_len) for seq_len in self.seq_lens]

    def as_dict(self) -> dict[str, object]:
        """JSON-ready dict: the inputs, then one entry per cell."""
        return {
            "model": self.model,
            "gpu": self.gpu,
            "world_size": self.world_size,
            "gpu_memory_gib": self.gpu_memory_gib,
            "host_memory_gib_per_node": self.host_memory_gib_per_node,
            "global_batch_size": self.global_batch_size,
            "objective": self.objective,
            "methods": list(self.methods),
            "seq_lens": list(self.seq_lens),
            "cells": [cell.as_dict() for cell in self.cells],
        }


def short_of(estimate: Estimate, host_memory_gib: float | None) -> tuple[str, ...]:
    """What a setting lacks: 'GPU memory' (need > GPU memory) and/or 'host RAM' (offload > host RAM)."""
    lacks = []
    if estimate.gpu_memory_need_gib > estimate.gpu_memory_gib:
        lacks.append("GPU memory")
    if host_memory_gib and estimate.host_memory_gib > host_memory_gib:
        lacks.append("host RAM")
    return tuple(lacks)


def short_reason(estimate: Estimate, host_memory_gib: float | None) -> str:
    """A few words saying what does not fit, e.g. 'needs 46.6 GiB/GPU > 24 GiB; host RAM 105 > 48 GiB'."""
    parts = []
    lacks = short_of(estimate, host_memory_gib)
    if "GPU memory" in lacks:
        parts.append(f"needs {estimate.gpu_memory_need_gib:.1f} GiB/GPU > {estimate.gpu_memory_gib:.0f} GiB")
    if "host RAM" in lacks:
        parts.append(f"host RAM {estimate.host_memory_gib:.0f} > {host_memory_gib:.0f} GiB")
    return "; ".join(parts) if parts else "does not fit"


def plan_cell(request: PlanRequest, method: str) -> SweepCell:
    """Run the planner for one request (its method already forced) and turn the answer into a cell.

    The cells of a sweep are compared at one global batch: the request's is kept even where the user left it unstated
    (``planner.batch_choice`` applies to one plan, not to a sweep's cells).
    """
    request = request.model_copy(update={"global_batch_stated": True})
    seq_len = request.workload.seq_len
    # Estimated before the search, which takes them from ``search_memo`` (its refusal's hints then estimate other
    # requests): a refused cell names the closest of these without estimating them again.
    scored = evaluate_candidates(request)
    try:
        result = search(request)
    except InvalidRequestError as error:  # a forced choice the hardware cannot run
        short = _first_clause(str(error)).removeprefix(f"--method {method} ")
        return SweepCell(method, seq_len, "unsupported", reason=str(error), short_reason=short)
    except InfeasibleError as error:
        host = request.cluster.host_memory_gib_per_node
        if not scored:
            return SweepCell(method, seq_len, "infeasible", reason=str(error), short_reason=_first_clause(str(error)))
        closest = closest_to_fitting(scored, host)
        return SweepCell(
            method,
            seq_len,
            "infeasible",
            reason=str(error),
            short_reason=short_reason(closest.estimate, host),
            closest_setting=closest.setting,
            closest_need_gib=closest.estimate.gpu_memory_need_gib,
            closest_short_of=short_of(closest.estimate, host),
        )
    return SweepCell(method, seq_len, "fits", setting=result.best.setting, estimate=result.best.estimate)


def plan_layouts(requests: CellRequest, method: str) -> SweepCell:
    """:func:`plan_cell` of one request, or of each layout's with the faster whole run kept.

    The choice is :func:`autotune.planner.packing.choose_packing`'s (plan's rule); when no layout fits, the cell of
    the first layout asked for (its closest candidate and reason).
    """
    if isinstance(requests, PlanRequest):
        return plan_cell(requests, method)
    cells = {layout: replace(plan_cell(request, method), packing=layout) for layout, request in requests.items()}
    times = {layout: run_time_s(c.estimate) if c.fits and c.estimate else None for layout, c in cells.items()}
    if all(time_s is None for time_s in times.values()):
        return next(iter(cells.values()))
    return cells[choose_packing(times)]


def _first_clause(message: str) -> str:
    return message.split(";")[0].strip()


def sweep(
    make_request: RequestFactory,
    methods: Sequence[str],
    seq_lens: Sequence[int],
    on_cell: Callable[[], None] | None = None,
) -> SweepResult:
    """Plan every (method, seq_len) pair with the method forced.

    Args:
        make_request: builds the validated request for (method, seq_len), or one per dataset layout
            (:data:`CellRequest`); it fixes everything else.
        methods: methods to force, e.g. ('full', 'lora', 'qlora'); must not be empty.
        seq_lens: sequence lengths in tokens, must not be empty; reported in increasing order.
        on_cell: called after each planned cell (progress display).

    Raises:
        InvalidRequestError: empty ``methods`` or ``seq_lens``; whatever ``make_request`` raises for bad values.
    """
    if not methods or not seq_lens:
        raise InvalidRequestError("a sweep needs at least one method and one sequence length")
    ordered_lens = tuple(sorted(set(seq_lens)))
    ordered_methods = tuple(dict.fromkeys(methods))
    requests = {(m, s): make_request(m, s) for m in ordered_methods for s in ordered_lens}
    cells_list = []
    for m in ordered_methods:
        for s in ordered_lens:
            cells_list.append(plan_layouts(requests[(m, s)], m))
            if on_cell is not None:
                on_cell()
    cells = tuple(cells_list)
    first_asked = next(iter(requests.values()))
    first = first_asked if isinstance(first_asked, PlanRequest) else next(iter(first_asked.values()))
    cluster = first.cluster
    return SweepResult(
        model=first.model.key,
        gpu=cluster.gpu.key,
        world_size=cluster.world_size,
        gpu_memory_gib=cluster.gpu.memory_gib,
        host_memory_gib_per_node=cluster.host_memory_gib_per_node,
        global_batch_size=first.workload.global_batch_size,
        objective=first.objective,
        methods=ordered_methods,
        seq_lens=ordered_lens,
        cells=cells,
    )
