"""``autotune plan --verify``: trace the chosen setting and the runner-up of each method, re-plan on a miss.

Each setting is traced with :func:`autotune.trace.agreement.traced_peak_bytes` (the real training step
on fake tensors at 2 and 4 decoder layers, extrapolated in depth; sharding by byte arithmetic). The traced peak
takes the analytic peak's place in the planner's fit test (peak + CUDA context + headroom ≤ GPU memory). When
the chosen setting does not fit by its trace, the plan moves to the fastest traced runner-up that does; when
none does, planning fails with the numbers. Needs torch (``autotune[train]``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from autotune.errors import InfeasibleError
from autotune.planner.search import PlanResult, RunnerUp, Scored, choose, why_not_chosen
from autotune.schemas.objective import Objective
from autotune.schemas.plan import PlanFile

if TYPE_CHECKING:
    from autotune.session.planning import PlanOptions

GIB = 2**30


@dataclass(frozen=True)
class VerifiedSetting:
    """One traced candidate: analytic and traced peak allocated GiB, and whether the trace fits the GPU."""

    scored: Scored
    traced_gib: float
    traced_phase: str
    fits: bool


def to_verify(result: PlanResult) -> list[Scored]:
    """The chosen setting and the first (best) runner-up of each method."""
    chosen = [result.best]
    methods = {result.best.setting.method}
    for alternative in result.alternatives:
        if alternative.setting.method not in methods:
            chosen.append(alternative.scored)
            methods.add(alternative.setting.method)
    return chosen


def verify_settings(plan_file: PlanFile, result: PlanResult) -> list[VerifiedSetting]:
    """Trace the settings of :func:`to_verify` (imports torch)."""
    from autotune.cli.tracing import require_torch

    require_torch()
    from autotune.profiles.catalog import resolve_gpu
    from autotune.quiet import quiet_third_party
    from autotune.trace.agreement import traced_peak_bytes

    quiet_third_party()
    choice = plan_file.cluster
    gpu, _ = resolve_gpu(choice.gpu)
    cluster = choice.spec(gpu)
    verified = []
    for scored in to_verify(result):
        traced, phase = traced_peak_bytes(plan_file.model, scored.setting, plan_file.workload.seq_len, cluster)
        estimate = scored.estimate
        need = estimate.gpu_memory_need_gib - estimate.peak_memory_gib + traced / GIB
        verified.append(VerifiedSetting(scored, traced / GIB, phase, need <= estimate.gpu_memory_gib))
    return verified


def render_verified(verified: list[VerifiedSetting]) -> None:
    """Predicted vs traced peak allocated memory per GPU, side by side."""
    from rich.table import Table

    from autotune.cli.console import console

    table = Table(title="--verify: analytic vs traced peak allocated memory per GPU (GiB)")
    for column in ("setting", "analytic", "traced", "difference", "traced phase", "fits by trace"):
        table.add_column(column, justify="left" if column in ("setting", "traced phase") else "right")
    for row in verified:
        predicted = row.scored.estimate.peak_memory_gib
        difference = (predicted - row.traced_gib) / row.traced_gib
        fits = "yes" if row.fits else "[red]no"
        table.add_row(
            row.scored.setting.short(),
            f"{predicted:.2f}",
            f"{row.traced_gib:.2f}",
            f"{difference:+.1%}",
            row.traced_phase,
            fits,
        )
    console().print(table)


def replan(result: PlanResult, verified: list[VerifiedSetting], objective: Objective) -> tuple[PlanResult, str | None]:
    """Keep the plan when its chosen setting fits by the trace; else move to the best traced runner-up that fits.

    The best is the one that ``choose`` (the planner's one rule) puts first. Returns the (possibly new) result and a
    note saying what changed; each runner-up says why it was not chosen.

    Raises:
        InfeasibleError: no traced setting fits.
    """
    if verified[0].fits:
        return result, None
    fitting = [v.scored for v in verified if v.fits]
    chosen = verified[0]
    if not fitting:
        raise InfeasibleError(
            f"by its trace the chosen setting ({chosen.scored.setting.short()}) needs a {chosen.traced_gib:.1f} GiB "
            "peak and does not fit, nor does any traced runner-up"
        )
    best = choose(fitting, objective)
    alternatives = [RunnerUp(result.best, f"does not fit by its trace ({chosen.traced_gib:.1f} GiB peak)")]
    for a in result.alternatives:
        if a.scored is not best:
            traced = next((v for v in verified if v.scored is a.scored), None)
            why = (
                f"does not fit by its trace ({traced.traced_gib:.1f} GiB peak)"
                if traced is not None and not traced.fits
                else why_not_chosen(a.scored, best, objective)
            )
            alternatives.append(RunnerUp(a.scored, why))
    note = (
        f"--verify: the trace puts {chosen.scored.setting.short()} at {chosen.traced_gib:.1f} GiB (analytic "
        f"{chosen.scored.estimate.peak_memory_gib:.1f}), which does not fit: re-planned to {best.setting.short()}"
    )
    replanned = PlanResult(
        best=best, alternatives=tuple(alternatives), rejected=result.rejected, searched=result.searched,
        workload=result.workload, notes=result.notes,
    )  # fmt: skip
    return replanned, note


def verify_plan(
    options: PlanOptions, plan_file: PlanFile, result: PlanResult
) -> tuple[PlanFile, PlanResult, list[str]]:
    """Trace, show predicted vs traced side by side, and re-plan when the chosen setting does not fit."""
    from autotune.planner.build import build_plan_file
    from autotune.session.planning import request_from_options

    verified = verify_settings(plan_file, result)
    render_verified(verified)
    new_result, note = replan(result, verified, plan_file.objective)
    if note is None:
        return plan_file, result, []
    request, _ = request_from_options(options)
    return build_plan_file(request, new_result), new_result, [note]
