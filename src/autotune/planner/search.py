"""Search: estimate every candidate, keep those that fit, rank them by the objective, explain the rest.

Ranking (``rank_key``): ``quality`` prefers full fine-tuning over LoRA over QLoRA (more trained
parameters, no quantization error: Hu et al. 2021; Dettmers et al. 2023 report QLoRA matching 16-bit
LoRA, so the order between them is the conservative one), then the shortest run; ``speed`` takes the
shortest run whatever the method; ``memory`` the lowest peak, then the shortest run. The run length is
the whole dataset when its size is known, else ``DEFAULT_RUN_STEPS`` optimizer steps, and includes
torch.compile's one-off compile time, so compile is chosen exactly when its saving over the run outweighs it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from autotune.costmodel.estimate import estimate_setting
from autotune.errors import InfeasibleError
from autotune.planner.request import Objective, Overrides, PlanRequest
from autotune.planner.space import candidates, check_overrides_supported, unsupported_reasons
from autotune.schemas.estimate import Estimate
from autotune.schemas.setting import TrainingSetting

DEFAULT_RUN_STEPS = 1000
"""Optimizer steps assumed for ranking when the dataset size is not given (compile amortization)."""

METHOD_QUALITY_ORDER = {"full": 0, "lora": 1, "qlora": 2}
MAX_ALTERNATIVES = 5


@dataclass(frozen=True)
class Scored:
    """A candidate with its estimate and the run time used for ranking (seconds)."""

    setting: TrainingSetting
    estimate: Estimate
    run_time_s: float


@dataclass(frozen=True)
class PlanResult:
    """The chosen setting, the runner-ups (best of each other family), and why families were rejected."""

    best: Scored
    alternatives: list[Scored]
    rejected: list[tuple[str, str]]
    searched: int


def run_time_s(estimate: Estimate) -> float:
    """Seconds of the whole run when the dataset size is known, else of ``DEFAULT_RUN_STEPS`` steps."""
    if estimate.total_time_s is not None:
        return estimate.total_time_s
    return estimate.step_time_s * DEFAULT_RUN_STEPS + estimate.compile_time_s


TIE_TOLERANCE = 0.02
"""Settings whose predicted run time is within this fraction of the fastest fitting one are ties: among them the
planner takes the one with the fewest extra moving parts (``complexity``), then the fewest micro-steps per
sequence (the largest micro batch: the costs the model leaves out — per-micro-step Python, kernel tails — all
favour it), then
the lowest peak memory. Outside the tolerance the predicted-fastest setting wins; the tolerance is well inside
the time error band, so a tie is a difference the model cannot resolve."""


def complexity(setting: TrainingSetting) -> int:
    """Weight of the non-default moving parts: 8-bit optimizer state (1), a chunked loss (1), FSDP reducing every
    micro-step (1: not the Trainer's default), CPU offload (2: it also needs host RAM and pinned memory, and its
    step time depends on the host's load)."""
    return (
        int(setting.optimizer != "adamw")
        + int(setting.loss_impl == "chunked")
        + int(setting.grad_sync != "last-micro-step")
        + 2 * int(setting.offloads_to_cpu)
    )


def rank_key(scored: Scored, objective: Objective) -> tuple[float, ...]:
    """Sort key (smaller is better) for an objective; see the module docstring (ties: ``choose``)."""
    run = scored.run_time_s
    if objective == "speed":
        return (run,)
    if objective == "memory":
        return (scored.estimate.peak_memory_gib, run)
    return (METHOD_QUALITY_ORDER[scored.setting.method], run)


def without_allocator_retries(estimate: Estimate) -> bool:
    """Whether the caching allocator can keep what it reserves at the peak: reserved + CUDA context ≤ the card.

    A setting whose allocated peak fits but whose reserved peak does not runs, yet each step the allocator fails
    to serve a request from its cache, frees every cached block (``cudaFree``, a device synchronization) and
    retries (PyTorch "CUDA semantics: memory management"; counted as ``num_alloc_retries`` in
    ``torch.cuda.memory_stats``) — a slowdown the step-time terms do not contain."""
    return not estimate.reserved_at_capacity


def choose(fitting: list[Scored], objective: Objective) -> Scored:
    """The planner's choice among fitting candidates: only those without allocator retries
    (``without_allocator_retries``) when any is left, the best by ``rank_key``, then, among candidates of the
    same leading key whose run time is within ``TIE_TOLERANCE`` of it, the fewest moving parts, then the largest
    micro batch, then the lowest peak memory. The same rule serves ``search`` and ``benchmarks/plan_quality.py``.

    Raises:
        ValueError: no candidates.
    """
    if not fitting:
        raise ValueError("choose: no fitting candidates")
    fitting = [s for s in fitting if without_allocator_retries(s.estimate)] or fitting
    best = min(fitting, key=lambda s: rank_key(s, objective))
    lead = rank_key(best, objective)[:-1]
    ties = [
        s
        for s in fitting
        if rank_key(s, objective)[:-1] == lead and s.run_time_s <= best.run_time_s * (1 + TIE_TOLERANCE)
    ]
    return min(
        ties,
        key=lambda s: (complexity(s.setting), -s.setting.micro_batch_size, s.estimate.peak_memory_gib, s.run_time_s),
    )


def _family(setting: TrainingSetting) -> str:
    return f"{setting.method} / {setting.sharding}"


def _states_gib(estimate: Estimate) -> float:
    parts = ("weights", "lora adapters", "gradients", "optimizer states")
    return sum(estimate.memory_breakdown_gib.get(name, 0.0) for name in parts)


def overshoot(scored: Scored, host_memory_gib: float | None) -> float:
    """How far a candidate is from fitting: the larger of GPU need / GPU memory and host need / host RAM
    (> 1 means it does not fit)."""
    e = scored.estimate
    ratio = e.gpu_memory_need_gib / e.gpu_memory_gib
    if host_memory_gib:
        ratio = max(ratio, e.host_memory_gib / host_memory_gib)
    return ratio


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


def evaluate_candidates(request: PlanRequest) -> list[Scored]:
    """Estimate every candidate of the request's space."""
    scored = []
    for setting in candidates(request):
        estimate = estimate_setting(request.model, request.cluster, request.workload, setting, request.coefficients)
        scored.append(Scored(setting, estimate, run_time_s(estimate)))
    return scored


def search(request: PlanRequest, progress: Callable[[int], None] | None = None) -> PlanResult:
    """Find the best fitting setting for a request.

    Raises:
        InvalidRequestError: a forced choice the hardware cannot run.
        InfeasibleError: nothing fits under the forced choices; the message gives the numbers and the
            nearest setting that fits without them (if any).
    """
    check_overrides_supported(request)
    scored = evaluate_candidates(request)
    if progress is not None:
        progress(len(scored))
    if not scored:
        raise InfeasibleError(
            f"no candidate settings: --global-batch-size {request.workload.global_batch_size} cannot be split "
            f"into whole micro batches on {request.cluster.world_size} GPU(s) with the forced options"
        )
    fitting = sorted((s for s in scored if s.estimate.fits), key=lambda s: rank_key(s, request.objective))
    rejected = _rejections(request, scored)
    if not fitting:
        raise InfeasibleError(_infeasible_message(request, scored))
    best = choose(fitting, request.objective)
    fitting.remove(best)
    fitting.insert(0, best)
    alternatives: list[Scored] = []
    seen = {_family(best.setting)}
    for candidate in fitting[1:]:
        family = _family(candidate.setting)
        if family in seen:
            continue
        seen.add(family)
        alternatives.append(candidate)
        if len(alternatives) == MAX_ALTERNATIVES:
            break
    return PlanResult(best=best, alternatives=alternatives, rejected=rejected, searched=len(scored))


def _rejections(request: PlanRequest, scored: list[Scored]) -> list[tuple[str, str]]:
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
            closest = min(members, key=lambda m: overshoot(m, host))
            lines.append((label, _why_not(label, closest, host)))
    return lines


def _infeasible_message(request: PlanRequest, scored: list[Scored]) -> str:
    cluster = request.cluster
    host = cluster.host_memory_gib_per_node
    closest = min(scored, key=lambda s: overshoot(s, host))
    forced = request.overrides.forced()
    head = (
        f"nothing fits on {cluster.world_size}× {cluster.gpu.key} ({cluster.gpu.memory_gib:.0f} GiB)"
        + (" with " + ", ".join(f"{k}={v}" for k, v in forced.items()) if forced else "")
        + f": {_why_not('', closest, host).split(': ', 1)[1]}"
    )
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
