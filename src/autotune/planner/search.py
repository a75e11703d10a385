"""Search: estimate every candidate, keep those that fit, choose by one rule (``choice_key``), explain the rest.

Objectives (``rank_key``): ``quality`` prefers full fine-tuning over LoRA over QLoRA (more trained
parameters, no quantization error: Hu et al. 2021; Dettmers et al. 2023 report QLoRA matching 16-bit
LoRA, so the order between them is the conservative one), then a full fine-tune's fp32 master weights over pure bf16
(``planner.precision_choice``), then the shortest run; ``speed`` takes the
shortest run whatever the method; ``memory`` the lowest peak, then the shortest run. The run length is
the whole dataset when its size is known, else ``DEFAULT_RUN_STEPS`` optimizer steps, and includes
torch.compile's one-off compile time, so compile is chosen exactly when its saving over the run outweighs it.
``choice_key`` adds, around the objective, the reserved-memory test and the 2 %-per-moving-part tie band; the
chosen setting, the runner-ups, forced ``--method`` / ``--sharding`` and ``autotune sweep`` all take its minimum.
"""

from __future__ import annotations

from dataclasses import dataclass

from autotune.costmodel.estimate import estimate_setting
from autotune.errors import InfeasibleError
from autotune.planner.batch_choice import plan_smaller_batch
from autotune.planner.fp8_choice import where_fp8_pays
from autotune.planner.precision_choice import precision_note, precision_rank
from autotune.planner.refusals import closest_to_fitting, infeasible_message, rejections
from autotune.planner.request import PlanRequest
from autotune.planner.search_memo import evaluated, remembered
from autotune.planner.space import (
    candidates,
    check_overrides_supported,
)
from autotune.schemas.estimate import Estimate
from autotune.schemas.objective import Objective
from autotune.schemas.setting import TrainingSetting
from autotune.schemas.workload import Workload

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
    """The chosen setting, the runner-ups (best of each other family), and why families were rejected.

    Immutable, tuples included: a process hands the same outcome to every search of one request (``search_memo``).
    """

    best: Scored
    alternatives: tuple[RunnerUp, ...]
    rejected: tuple[tuple[str, str], ...]
    searched: int
    workload: Workload | None = None
    """The workload planned when the planner chose the global batch (``batch_choice``); None: the request's."""
    notes: tuple[str, ...] = ()
    """What the planner chose that the user did not ask for, one line each (``batch_choice.batch_note``)."""

    def planned_workload(self, request: PlanRequest) -> Workload:
        """The workload this result planned: the request's, or the one with the global batch the planner chose."""
        return self.workload if self.workload is not None else request.workload


def run_time_s(estimate: Estimate) -> float:
    """Seconds of the whole run when the dataset size is known, else of ``DEFAULT_RUN_STEPS`` steps."""
    if estimate.total_time_s is not None:
        return estimate.total_time_s
    return estimate.step_time_s * DEFAULT_RUN_STEPS + estimate.compile_time_s


TIE_TOLERANCE = 0.02
"""Fraction of run time each extra moving part (``complexity``) costs in the choice rule (``choice_key``): a
setting with k more parts must be more than about 2·k % faster to win. The predicted time carries a band of tens of
percent (``Estimate.time_uncertainty_fraction``), so a difference this small is one the model cannot resolve, while
each part is a real cost it does not predict (a library path less travelled; CPU offload also depends on the host's
load). 2 % is a judgement, not a fit: it is the margin the planner asks before it adds a part."""


def complexity(setting: TrainingSetting) -> int:
    """Weight of the non-default moving parts (see ``moving_parts``)."""
    return sum(weight for _, weight in moving_parts(setting))


def moving_parts(setting: TrainingSetting) -> list[tuple[str, int]]:
    """The non-default moving parts of a setting with their weights.

    8-bit optimizer state (1), a chunked loss (1), FSDP reducing every micro-step (1: not the Trainer's default), CPU
    offload (2: it also needs host RAM and pinned memory, and its step time depends on the host's load), the optimizer
    stepped inside the backward (1: the core's hooks in place of the Trainer's step, and no gradient clipping), paged
    optimizer states (1 more than 8-bit: managed memory the driver evicts to the host; its states leave the allocated
    peak, which must not make it win a tie it only wins on paper).
    """
    parts = []
    if setting.optimizer != "adamw":
        parts.append(("8-bit optimizer", 1))
    if setting.optimizer == "paged-adamw-8bit":
        parts.append(("paged optimizer states", 1))
    if setting.optimizer_in_backward:
        parts.append(("optimizer in backward", 1))
    if setting.loss_impl == "chunked":
        parts.append(("chunked loss", 1))
    if setting.grad_sync != "last-micro-step":
        parts.append(("FSDP sync every micro-step", 1))
    if setting.offloads_to_cpu:
        parts.append(("CPU offload", 2))
    return parts


def rank_key(scored: Scored, objective: Objective) -> tuple[float, ...]:
    """The objective's order (smaller is better), its last element the run time: see the module docstring.

    ``choice_key`` is the whole rule.
    """
    run = scored.run_time_s
    if objective == "speed":
        return (run,)
    if objective == "memory":
        return (scored.estimate.peak_memory_gib, run)
    return (METHOD_QUALITY_ORDER[scored.setting.method], precision_rank(scored.setting), run)


def without_allocator_retries(estimate: Estimate) -> bool:
    """Whether the caching allocator can keep what it reserves at the peak: reserved + CUDA context ≤ the card.

    A setting whose allocated peak fits but whose reserved peak does not runs, yet each step the allocator fails
    to serve a request from its cache, frees every cached block (``cudaFree``, a device synchronization) and
    retries (PyTorch "CUDA semantics: memory management"; counted as ``num_alloc_retries`` in
    ``torch.cuda.memory_stats``) — a slowdown the step-time terms do not contain.
    """
    return not estimate.reserved_at_capacity


def adjusted_run_time_s(scored: Scored) -> float:
    """The run time the rule compares: run time × (1 + ``TIE_TOLERANCE`` × ``complexity``), seconds."""
    return scored.run_time_s * (1 + TIE_TOLERANCE * complexity(scored.setting))


def choice_key(scored: Scored, objective: Objective) -> tuple[float, ...]:
    """The planner's one choice rule as a sort key (smaller is better), compared element by element.

    1. settings whose reserved memory stays below the card (``without_allocator_retries``) before the others;
    2. the objective's leading key (``rank_key`` without the run time): quality — full, then LoRA, then QLoRA;
       memory — the lowest peak allocated memory; speed — nothing;
    3. the adjusted run time (``adjusted_run_time_s``: 2 % per moving part);
    4. then the largest micro batch, the lowest peak allocated memory, the shortest run time. These break exact
       ties only: the per-micro-step costs a larger micro batch shares (kernel launch tails, micro-step overhead)
       are terms of the predicted time, no longer a reason to trade time for a larger micro batch.

    Because it is one key (a total order), the chosen setting, each runner-up (the first of its method /
    sharding family), ``--method`` / ``--sharding`` forced and ``autotune sweep`` agree: the best of any subset
    that contains the chosen setting is the chosen setting.
    """
    return (
        float(not without_allocator_retries(scored.estimate)),
        *rank_key(scored, objective)[:-1],
        adjusted_run_time_s(scored),
        -scored.setting.micro_batch_size,
        scored.estimate.peak_memory_gib,
        scored.run_time_s,
    )


def choose(fitting: list[Scored], objective: Objective) -> Scored:
    """The planner's choice among fitting candidates: the smallest ``choice_key``.

    The same rule serves ``search`` (the choice and each runner-up), ``autotune sweep`` and
    ``benchmarks/plan_quality.py``.

    Raises:
        ValueError: no candidates.
    """
    if not fitting:
        raise ValueError("choose: no fitting candidates")
    return min(fitting, key=lambda s: choice_key(s, objective))


def why_not_chosen(candidate: Scored, chosen: Scored, objective: Objective) -> str:
    """Why ``choice_key`` puts ``chosen`` before ``candidate``: the first element of the key where they differ.

    Said in words with the numbers (reserved memory at the card; the objective; within the tie band; slower).
    """
    e, c = candidate.estimate, chosen.estimate
    if without_allocator_retries(c) and not without_allocator_retries(e):
        return (
            f"reserved memory at the card: the allocator would hold {e.peak_reserved_gib:.1f} GiB + "
            f"{e.cuda_context_gib:.1f} context of {e.gpu_memory_gib:.0f} GiB and free its cache to retry"
        )
    if rank_key(candidate, objective)[:-1] != rank_key(chosen, objective)[:-1]:
        if objective == "memory":
            return f"objective memory: higher peak ({e.peak_memory_gib:.1f} vs {c.peak_memory_gib:.1f} GiB)"
        if chosen.setting.method == candidate.setting.method:
            return "objective quality prefers fp32 master weights to pure bf16"
        return f"objective quality prefers {chosen.setting.method} to {candidate.setting.method}"
    longer = candidate.run_time_s / chosen.run_time_s - 1
    if adjusted_run_time_s(candidate) != adjusted_run_time_s(chosen):
        if longer < 0:
            needed = 1 - (1 + TIE_TOLERANCE * complexity(chosen.setting)) / (
                1 + TIE_TOLERANCE * complexity(candidate.setting)
            )
            return (
                f"within the tie band: {-longer:.1%} faster, short of the {needed:.1%} that its moving parts "
                f"({_parts_text(candidate.setting)}) need over the chosen setting's ({_parts_text(chosen.setting)}) "
                f"at {TIE_TOLERANCE:.0%} each"
            )
        return f"slower: the run takes {longer:.1%} longer"
    if candidate.setting.micro_batch_size != chosen.setting.micro_batch_size:
        return "same adjusted run time, smaller micro batch"
    return "same adjusted run time, higher peak memory"


def _parts_text(setting: TrainingSetting) -> str:
    parts = moving_parts(setting)
    return ", ".join(f"{name}: {weight}" for name, weight in parts) if parts else "none"


@dataclass(frozen=True)
class RunnerUp:
    """The best setting of one other method / sharding family and why the chosen setting beat it."""

    scored: Scored
    why: str

    @property
    def setting(self) -> TrainingSetting:
        """The runner-up setting."""
        return self.scored.setting

    @property
    def estimate(self) -> Estimate:
        """Its estimate."""
        return self.scored.estimate


def runner_ups(fitting: list[Scored], chosen: Scored, objective: Objective) -> list[RunnerUp]:
    """The best (``choose``) of each method / sharding family other than the chosen one's, in ``choice_key`` order.

    The best of each other method always, then the others up to ``MAX_ALTERNATIVES`` in all.
    """
    winners: dict[str, Scored] = {}
    for s in fitting:
        family = _family(s.setting)
        if family == _family(chosen.setting):
            continue
        if family not in winners or choice_key(s, objective) < choice_key(winners[family], objective):
            winners[family] = s
    ordered = sorted(winners.values(), key=lambda s: choice_key(s, objective))
    methods_seen = {chosen.setting.method}
    must = []
    for s in ordered:
        if s.setting.method not in methods_seen:
            methods_seen.add(s.setting.method)
            must.append(s)
    rest = [s for s in ordered if s not in must][: max(0, MAX_ALTERNATIVES - len(must))]
    kept = [s for s in ordered if s in must or s in rest]
    return [RunnerUp(s, why_not_chosen(s, chosen, objective)) for s in kept]


def _family(setting: TrainingSetting) -> str:
    return f"{setting.method} / {setting.sharding}"


def evaluate_candidates(request: PlanRequest) -> tuple[Scored, ...]:
    """Estimate every candidate of the request's space (once per process for the newest few: ``search_memo``)."""
    return evaluated(request.model_dump_json(), lambda: _evaluate(request))


def _evaluate(request: PlanRequest) -> tuple[Scored, ...]:
    scored = []
    for setting in candidates(request):
        estimate = estimate_setting(request.model, request.cluster, request.workload, setting, request.coefficients)
        scored.append(Scored(setting, estimate, run_time_s(estimate)))
    return tuple(scored)


def search(request: PlanRequest, *, explain: bool = True) -> PlanResult:
    """Find the best fitting setting for a request (once per process: ``search_memo`` keeps each request's outcome).

    Where nothing fits and the user did not state the global batch, the plan at the largest smaller one that fits
    (:func:`autotune.planner.batch_choice.plan_smaller_batch`), with its note. ``explain`` False: a refusal's message
    is left empty (the batch choice only asks whether something fits; the message's hints run more searches).

    Raises:
        InvalidRequestError: a forced choice the hardware cannot run.
        InfeasibleError: nothing fits under the forced choices; the message gives the numbers and the
            nearest setting that fits without them (if any).
    """
    return remembered(f"{explain} {request.model_dump_json()}", lambda: _search(request, explain))


def _search(request: PlanRequest, explain: bool) -> PlanResult:
    check_overrides_supported(request)
    scored = where_fp8_pays(evaluate_candidates(request), request)
    if not scored:
        raise InfeasibleError(
            f"no candidate settings: --global-batch-size {request.workload.global_batch_size} cannot be split "
            f"into whole micro batches on {request.cluster.world_size} GPU(s) with the forced options"
        )
    fitting = [s for s in scored if s.estimate.fits]
    rejected = rejections(request, scored)
    if not fitting:
        closest = closest_to_fitting(scored, request.cluster.host_memory_gib_per_node).estimate
        shortfall = f"the closest setting needs {closest.gpu_memory_need_gib:.1f} GiB of {closest.gpu_memory_gib:.0f}"
        smaller = plan_smaller_batch(request, lambda r: search(r, explain=False), shortfall)
        if smaller is not None:
            return smaller
        raise InfeasibleError(infeasible_message(request, scored, search) if explain else "nothing fits")
    best = choose(fitting, request.objective)
    alternatives = runner_ups(fitting, best, request.objective)
    note = precision_note(best, fitting, request.objective, forced=request.overrides.precision is not None)
    return PlanResult(
        best=best,
        alternatives=tuple(alternatives),
        rejected=tuple(rejected),
        searched=len(scored),
        notes=(note,) if note else (),
    )
