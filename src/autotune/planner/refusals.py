"""Why settings were rejected: one line per family with none that fits, and the refusal where nothing fits.

Kept beside the search (:mod:`autotune.planner.search`), which passes itself in for the refusal's further searches
(the lever hint's smaller global batches, the nearest setting without the forced choices), so that the search module
holds the choice and this one the explanations.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from autotune.errors import InfeasibleError
from autotune.planner.lever_hints import in_backward_hint
from autotune.planner.request import Overrides, PlanRequest
from autotune.planner.space import ONE_GPU_OFFLOAD_ACCUMULATION, unsupported_reasons
from autotune.schemas.estimate import Estimate
from autotune.schemas.memory_parts import MODEL_STATE_PARTS

if TYPE_CHECKING:
    from autotune.planner.search import PlanResult, Scored


def _states_gib(estimate: Estimate) -> float:
    return sum(estimate.memory_breakdown_gib.get(name, 0.0) for name in MODEL_STATE_PARTS)


def overshoot(scored: Scored, host_memory_gib: float | None) -> float:
    """How far a candidate is from fitting (> 1 means it does not fit).

    The larger of GPU need / GPU memory and host need / host RAM.
    """
    e = scored.estimate
    ratio = e.gpu_memory_need_gib / e.gpu_memory_gib
    if host_memory_gib:
        ratio = max(ratio, e.host_memory_gib / host_memory_gib)
    return ratio


def closest_to_fitting(scored: Sequence[Scored], host_memory_gib: float | None) -> Scored:
    """The candidate of ``scored`` (not empty) with the least :func:`overshoot`: the one a refusal names."""
    return min(scored, key=lambda s: overshoot(s, host_memory_gib))


def _why_not(label: str, closest: Scored, host_memory_gib: float | None) -> str:
    """One line with the numbers: what the closest-to-fitting setting of a family needs and has."""
    e = closest.estimate
    needed = e.gpu_memory_need_gib
    reasons = []
    if needed > e.gpu_memory_gib:
        reasons.append(
            f"needs {needed:.1f} GiB per GPU (peak {e.peak_memory_gib:.1f}, of which model states "
            f"{_states_gib(e):.1f}; + {e.cuda_context_gib:.1f} context + {e.memory_headroom_gib:.1f} headroom) "
            f"> {e.gpu_memory_gib:.0f} GiB"
        )
    if host_memory_gib and e.host_memory_gib > host_memory_gib:
        reasons.append(f"needs {e.host_memory_gib:.0f} GiB host RAM for offload > {host_memory_gib:.0f} GiB")
    return f"{label}: closest setting ({closest.setting.short()}) " + " and ".join(reasons)


def rejections(request: PlanRequest, scored: Sequence[Scored]) -> list[tuple[str, str]]:
    """One line per method and per sharding that has candidates but none that fit, plus unsupported ones."""
    lines: list[tuple[str, str]] = list(unsupported_reasons(request).items())
    for attribute in ("method", "sharding"):
        groups: dict[str, list[Scored]] = {}
        for s in scored:
            groups.setdefault(str(getattr(s.setting, attribute)), []).append(s)
        for label, members in groups.items():
            if any(m.estimate.fits for m in members):
                continue
            host = request.cluster.host_memory_gib_per_node
            closest = closest_to_fitting(members, host)
            clause = _one_micro_step_clause(request) if label == "fsdp-offload" else ""
            lines.append((label, _why_not(label, closest, host) + clause))
    return lines


def _one_micro_step_clause(request: PlanRequest) -> str:
    """Why FSDP CPU offload on one GPU was tried with one micro-step only (``offload_accumulation_error``), or ''."""
    if request.cluster.world_size != 1:
        return ""
    return (
        f" (fsdp-offload on one GPU runs the whole global batch as one micro batch: {ONE_GPU_OFFLOAD_ACCUMULATION}; "
        "zero3-offload accumulates on the host)"
    )


def infeasible_message(request: PlanRequest, scored: Sequence[Scored], search: Callable[..., PlanResult]) -> str:
    """The refusal of a request where none of ``scored`` fits, in one line.

    The numbers of the closest setting, the lever hint (``lever_hints``) and, with forced choices, the nearest setting
    that fits without them.

    ``search``: the planner's search (``search(request, explain=...)``; passed in: this module sits below it).
    """
    cluster = request.cluster
    host = cluster.host_memory_gib_per_node
    closest = closest_to_fitting(scored, host)
    forced = request.overrides.forced()
    head = (
        f"nothing fits on {cluster.world_size}× {cluster.gpu.key} ({cluster.gpu.memory_gib:.0f} GiB)"
        + (" with " + ", ".join(f"{k}={v}" for k, v in forced.items()) if forced else "")
        + f": {_why_not('', closest, host).split(': ', 1)[1]}"
    )
    if request.overrides.sharding == "fsdp-offload":
        head += _one_micro_step_clause(request)
    head += in_backward_hint(request, [s.setting for s in scored], lambda r: search(r, explain=False).best)
    if not forced:
        return head + "; try more GPUs, a shorter --seq-len or a larger GPU"
    relaxed = request.model_copy(update={"overrides": Overrides()})
    try:
        nearest = search(relaxed).best
    except InfeasibleError:
        return head + "; nothing fits without the forced options either"
    e = nearest.estimate
    return head + (
        f". Nearest that fits: {nearest.setting.short()} (peak {e.peak_memory_gib:.1f} GiB, "
        f"{e.tokens_per_s:,.0f} tokens/s)"
    )
