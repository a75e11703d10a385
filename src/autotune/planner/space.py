"""The candidate space: every setting the planner considers, before feasibility and ranking.

Choices that cannot run on the hardware are not generated but reported (``unsupported_reasons``): QLoRA
and 8-bit optimizers need bitsandbytes' kernels (not on ROCm consumer cards: seed 000, "bitsandbytes
doesn't work for ROCm"); bf16 needs a GPU with bf16 (not V100 / T4: ``supports_bf16`` of their profiles); DDP and FSDP
need more than one GPU, except FSDP CPU offload (:data:`ONE_GPU_SHARDINGS`).

On one GPU the planner searches ``none`` and the offloading shardings (:data:`SINGLE_GPU_SHARDINGS`; ZeRO-Offload and
FSDP CPU offload run on one GPU: Ren et al. 2021); DeepSpeed ZeRO-2 / ZeRO-3 without offload run there too when asked
for (``--sharding zero3``), but the planner does not generate them itself: on one rank they partition nothing and
only add their overhead (ZeRO-3's module hooks). FSDP CPU offload is generated without gradient accumulation on
one GPU, and only with ``last-micro-step`` on several: torch FSDP with CPU offload accumulates only under
``no_sync()`` (:func:`offload_accumulation_error`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from autotune.planner.fp8_choice import fp8_choices
from autotune.planner.precision_choice import precision_choices
from autotune.planner.request import PlanRequest
from autotune.schemas.lora_targets import effective_lora_dropout
from autotune.schemas.model import ModelSpec
from autotune.schemas.setting import (
    DEFAULT_LORA_ALPHA,
    DEFAULT_LORA_RANK,
    FSDP_SHARDINGS,
    GRAD_SYNCS,
    METHODS,
    OFFLOAD_SHARDINGS,
    OPTIMIZERS,
    PARAMETER_SHARDINGS,
    ZERO_SHARDINGS,
    AttentionImpl,
    GradSync,
    LossImpl,
    Method,
    Optimizer,
    Precision,
    Sharding,
    TrainingSetting,
    activation_offloading_error,
    attention_run_error,
    default_precision,
    fp8_error,
    optimizer_in_backward_error,
    stochastic_rounding_error,
)

ONE_GPU_SHARDINGS: tuple[Sharding, ...] = ("none", "fsdp-offload", "zero2", "zero3", "zero3-offload")
"""What runs on one GPU when asked for: no data parallelism, CPU offload (ZeRO-Offload and FSDP CPU offload: Ren et
al. 2021) and DeepSpeed ZeRO in one process (the DeepSpeed engine runs with world size 1; ZeRO-Infinity offloads from
one GPU: Rajbhandari et al. 2021): what the user names is what runs. DDP and FSDP without offload stay refused: on
one rank they shard nothing and ``none`` trains the same way without them."""
SINGLE_GPU_SHARDINGS: tuple[Sharding, ...] = ("none", "fsdp-offload", "zero3-offload")
"""The shardings the planner searches on one GPU; a forced one may be any of ``ONE_GPU_SHARDINGS``."""
MULTI_GPU_SHARDINGS: tuple[Sharding, ...] = ("ddp", "fsdp", "fsdp-offload", "zero2", "zero3", "zero3-offload")
HOST_MEMORY_PER_GPU_MEMORY = 2.0
"""Host RAM assumed per node when the user does not give it: twice the node's GPU memory (a common
server sizing rule — e.g. NVIDIA DGX A100: 2 TB host for 640 GB of GPU memory; 64 GB workstations for
one 24 GB card). Offload plans are checked against it; ``--host-memory-gib`` replaces it."""

LOSS_IMPLEMENTATIONS: tuple[LossImpl, ...] = ("fp32-upcast", "chunked")
"""Loss implementations the training core provides (``native`` only describes other trainers' seeds)."""


def assumed_host_memory_gib(gpu_memory_gib: float, num_gpus_per_node: int) -> float:
    """Host RAM per node assumed when not given (see ``HOST_MEMORY_PER_GPU_MEMORY``)."""
    return HOST_MEMORY_PER_GPU_MEMORY * gpu_memory_gib * num_gpus_per_node


def unsupported_reasons(request: PlanRequest) -> dict[str, str]:
    """Families that cannot run on this hardware at all, with the reason (one line each)."""
    gpu = request.cluster.gpu
    reasons: dict[str, str] = {}
    if not gpu.supports_bitsandbytes:
        reasons["qlora"] = f"qlora: bitsandbytes 4-bit kernels are not available on {gpu.name}"
        reasons["8-bit optimizers"] = f"8-bit optimizers: bitsandbytes is not available on {gpu.name}"
    if not gpu.supports_bf16:
        reasons["bf16"] = f"bf16: {gpu.name} has no bf16; fp16 mixed precision is used instead"
    return reasons


def check_overrides_supported(request: PlanRequest) -> None:
    """Reject forced choices the hardware cannot run (stage-2 validation of overrides).

    Raises:
        InvalidRequestError: names the option, the GPU and what to use instead.
    """
    from autotune.errors import InvalidRequestError

    gpu = request.cluster.gpu
    o = request.overrides
    if not gpu.supports_bitsandbytes and o.method == "qlora":
        raise InvalidRequestError(
            f"--method qlora needs bitsandbytes, which {gpu.name} does not support; use --method lora"
        )
    if not gpu.supports_bitsandbytes and o.optimizer in ("adamw-8bit", "paged-adamw-8bit"):
        raise InvalidRequestError(
            f"--optimizer {o.optimizer} needs bitsandbytes, which {gpu.name} does not support; use --optimizer adamw"
        )
    if not gpu.supports_bf16 and o.precision in ("bf16", "bf16-mixed"):
        raise InvalidRequestError(f"--precision {o.precision}: {gpu.name} has no bf16; use fp16-mixed")
    error = sharding_error(o.sharding, request.cluster.world_size)
    if error:
        raise InvalidRequestError(error)
    if o.loss_impl == "chunked" and o.sharding in PARAMETER_SHARDINGS:
        raise InvalidRequestError(
            f"--loss-impl chunked cannot run with --sharding {o.sharding} (the weights are sharded); use "
            "fp32-upcast, or ddp / zero2 / none"
        )
    error = grad_sync_error(o.grad_sync, o.sharding, request.cluster.world_size)
    if error:
        raise InvalidRequestError(error)
    fewest_accum = _fewest_grad_accum(request)
    if fewest_accum is not None:
        grad_sync = o.grad_sync or "last-micro-step"
        error = offload_accumulation_error(o.sharding, fewest_accum, grad_sync, request.cluster.world_size)
        if error:
            raise InvalidRequestError(error)
    if o.loss_impl == "native":
        raise InvalidRequestError(
            "--loss-impl native describes other trainers; autotune's core runs fp32-upcast or chunked"
        )
    attention_error = attention_run_error(o.attention_impl) if o.attention_impl else None
    if attention_error:
        raise InvalidRequestError(attention_error)
    error = fp8_error(o.fp8, o.method, gpu.name, gpu.vendor, gpu.generation)
    if error:
        raise InvalidRequestError(error)
    if o.optimizer_in_backward and fewest_accum is not None:
        error = optimizer_in_backward_error(True, fewest_accum, o.sharding)
        if error:
            raise InvalidRequestError(error.replace("optimizer_in_backward", "--optimizer-in-backward"))


def sharding_error(sharding: str | None, world_size: int) -> str | None:
    """Why ``--sharding`` cannot run on ``world_size`` GPUs, or None (one rule for plan and estimate).

    On one GPU any of ``ONE_GPU_SHARDINGS`` runs (DeepSpeed ZeRO in one process included); DDP and FSDP without
    offload need several.
    """
    if world_size == 1 and sharding is not None and sharding not in ONE_GPU_SHARDINGS:
        return (
            f"--sharding {sharding} needs more than one GPU (use --num-gpus); on one GPU use "
            f"{', '.join(ONE_GPU_SHARDINGS[:-1])} or {ONE_GPU_SHARDINGS[-1]}"
        )
    if world_size > 1 and sharding == "none":
        return "--sharding none with several GPUs would leave all but one idle; use ddp"
    return None


def grad_sync_error(grad_sync: str | None, sharding: str | None, world_size: int) -> str | None:
    """Why ``--grad-sync every-micro-step`` cannot apply, or None (one rule for plan and estimate).

    ``sharding`` None = the planner chooses.
    """
    if grad_sync != "every-micro-step":
        return None
    if world_size == 1 or sharding not in (None, *FSDP_SHARDINGS):
        return (
            "--grad-sync every-micro-step applies to FSDP on several GPUs (--sharding fsdp or fsdp-offload, "
            "--num-gpus > 1); other shardings synchronise as their library does"
        )
    return None


ONE_GPU_OFFLOAD_ACCUMULATION = (
    "torch FSDP with CPU offload keeps only the last micro-batch's gradient outside no_sync(), which accelerate "
    "uses only with several processes"
)
"""Why FSDP CPU offload cannot accumulate gradients on one GPU (:func:`offload_accumulation_error`): the one wording of
the refusal here and of the clause ``planner.search`` adds where the planner tried fsdp-offload at one micro-step."""


def offload_accumulation_error(sharding: str | None, grad_accum: int, grad_sync: str, world_size: int) -> str | None:
    """Why FSDP CPU offload with ``grad_accum`` micro-steps would not train what was asked, or None.

    torch FSDP "does not support gradient accumulation outside ``no_sync()`` when using CPU offloading ... FSDP uses
    the newly-reduced gradient instead of accumulating with any existing gradient" (``FullyShardedDataParallel``
    docstring, Limitations; the TODO in ``_flat_param.py`` ``prepare_gradient_for_backward``; pytorch/pytorch#73784):
    each micro-step's offload copies its own gradient over the one on the host, so the optimizer steps on the last
    micro-batch's gradient only. The Trainer runs the other micro-steps under ``Accelerator.no_sync``, which applies
    only with several processes (accelerate ``Accelerator.no_sync``: ``if self.use_distributed``) and not at all with
    ``grad_sync`` every-micro-step (``sync_each_batch``). So FSDP CPU offload accumulates correctly on several GPUs
    with ``last-micro-step`` only; elsewhere it needs one micro-step per optimizer step. DeepSpeed ZeRO-Offload
    accumulates on the host itself (``zero3-offload``). One rule for ``plan``, ``estimate`` and ``launch``.

    Args:
        sharding: the sharding (None: the planner chooses, nothing to refuse).
        grad_accum: micro-steps per optimizer step.
        grad_sync: ``last-micro-step`` or ``every-micro-step``.
        world_size: GPUs in all.
    """
    if sharding != "fsdp-offload" or grad_accum <= 1:
        return None
    if world_size == 1:
        return (
            f"--sharding fsdp-offload on one GPU cannot accumulate gradients ({grad_accum} micro-steps per "
            f"optimizer step): {ONE_GPU_OFFLOAD_ACCUMULATION}; use one micro-step per step "
            "(--micro-batch-size = --global-batch-size) or --sharding zero3-offload"
        )
    if grad_sync == "every-micro-step":
        return (
            "--grad-sync every-micro-step with --sharding fsdp-offload would keep only the last micro-batch's "
            "gradient (torch FSDP with CPU offload does not accumulate outside no_sync()); use --grad-sync "
            "last-micro-step"
        )
    return None


def _fewest_grad_accum(request: PlanRequest) -> int | None:
    """The fewest micro-steps per optimizer step the planner can try (:func:`micro_batch_sizes`), or None for none."""
    per_rank = request.workload.global_batch_size // request.cluster.world_size
    accumulations = [per_rank // micro for micro in micro_batch_sizes(request)]
    return min(accumulations) if accumulations else None


def micro_batch_sizes(request: PlanRequest) -> list[int]:
    """Micro batch sizes whose accumulation steps come out whole: global = micro × accum × ranks."""
    per_rank = request.workload.global_batch_size // request.cluster.world_size
    forced = request.overrides.micro_batch_size
    if forced is not None:
        return [forced]
    if request.overrides.grad_accum is not None:
        return [per_rank // request.overrides.grad_accum] if per_rank % request.overrides.grad_accum == 0 else []
    largest = min(per_rank, _MAX_MICRO_BATCH)
    return [m for m in range(1, largest + 1) if per_rank % m == 0 and (m & (m - 1) == 0 or m == per_rank)]


_MAX_MICRO_BATCH: int = next(
    int(rule.le) for rule in TrainingSetting.model_fields["micro_batch_size"].metadata if hasattr(rule, "le")
)
"""The schema's upper bound of ``micro_batch_size`` (a larger global batch accumulates instead)."""


def _choices(forced: Any, options: tuple[Any, ...]) -> tuple[Any, ...]:
    return (forced,) if forced is not None else options


def attention_impl_for(model: ModelSpec) -> AttentionImpl:
    """The attention implementation the training core can run for ``model``: ``sdpa``, or ``eager`` for soft-capping.

    ``eager`` when the model soft-caps its attention logits (Gemma 2), which PyTorch SDPA cannot do — transformers
    refuses it (``Gemma2PreTrainedModel._supports_sdpa = False``, "sdpa does not support softcapping", transformers
    5.23).
    """
    return "eager" if model.attn_logit_softcapping else "sdpa"


def grad_syncs(request: PlanRequest, sharding: Sharding, grad_accum: int) -> tuple[GradSync, ...]:
    """When FSDP reduces gradients: both choices where they differ, else the default.

    Both differ for FSDP on several GPUs with accumulation — ``last-micro-step`` keeps unsharded gradients for fewer
    collectives, ``every-micro-step`` reduce-scatters each micro-step and keeps only shards. A forced choice applies to
    FSDP settings only.
    """
    if sharding not in FSDP_SHARDINGS or request.cluster.world_size == 1 or grad_accum == 1:
        return ("last-micro-step",)
    return _choices(request.overrides.grad_sync, GRAD_SYNCS)


def optimizer_in_backward_choices(
    request: PlanRequest, method: Method, sharding: Sharding, grad_accum: int
) -> tuple[bool, ...]:
    """Whether the optimizer steps inside the backward: both where it can (``optimizer_in_backward_error``), else off.

    Searched for full fine-tuning only, where it removes the gradient buffer of the whole model (an adapter method's
    gradients are the adapters', a few hundred MiB at most); forced on, for any method where it runs.
    """
    forced = request.overrides.optimizer_in_backward
    runs = optimizer_in_backward_error(True, grad_accum, sharding) is None
    if forced is not None:
        return (forced,) if runs or not forced else ()
    return (False, True) if runs and method == "full" else (False,)


def _lever_choices(forced: bool | None, runs: bool, searched: bool) -> tuple[bool, ...]:
    """A boolean lever's values: the forced one where it runs (none when forced on and it cannot).

    Unforced: off and on where it runs and is ``searched``, else off.
    """
    if forced is not None:
        return (forced,) if runs or not forced else ()
    return (False, True) if runs and searched else (False,)


def lever_choices(request: PlanRequest, setting: TrainingSetting) -> Iterator[TrainingSetting]:
    """``setting`` with each value of the two memory levers where they run (``schemas.setting``'s rules).

    bf16 stochastic rounding (``stochastic_rounding_error``): searched for full fine-tuning (pure bf16 weights; an
    adapter method's are a few MiB), forced for any method. Activation offloading (``activation_offloading_error``):
    searched where it runs — it adds PCIe time, so it wins only where it is what fits or lets a larger micro batch
    run without recompute.
    """
    o = request.overrides
    rounding_runs = stochastic_rounding_error(True, setting.precision, setting.optimizer, setting.sharding) is None
    full_mixed = setting.method == "full" and setting.precision.endswith("-mixed")
    offload_error = activation_offloading_error(
        True, setting.grad_ckpt, setting.compile, setting.sharding, full_mixed=full_mixed
    )
    for rounding in _lever_choices(o.bf16_stochastic_rounding, rounding_runs, setting.method == "full"):
        for offloading in _lever_choices(o.activation_offloading, offload_error is None, searched=True):
            if not rounding and not offloading:
                yield setting
            else:
                yield setting.model_copy(
                    update={"bf16_stochastic_rounding": rounding, "activation_offloading": offloading}
                )


def candidates(request: PlanRequest) -> Iterator[TrainingSetting]:
    """Every setting in the search space that the hardware supports, with the user's forced choices."""
    gpu = request.cluster.gpu
    o = request.overrides
    world = request.cluster.world_size
    methods: tuple[Method, ...] = _choices(o.method, METHODS)
    if o.adapter_options():  # an adapter option asks for an adapter method (planner/request.py ADAPTER_ONLY_FIELDS)
        methods = tuple(m for m in methods if m != "full")
    if not gpu.supports_bitsandbytes or o.fp8:  # fp8 replaces bf16 linears, not NF4 ones (setting.fp8_error)
        methods = tuple(m for m in methods if m != "qlora")
    optimizers: tuple[Optimizer, ...] = _choices(o.optimizer, OPTIMIZERS)
    if not gpu.supports_bitsandbytes:
        optimizers = tuple(opt for opt in optimizers if opt == "adamw")
    precision: Precision = o.precision or default_precision(gpu.supports_bf16)
    shardings: tuple[Sharding, ...] = _choices(o.sharding, SINGLE_GPU_SHARDINGS if world == 1 else MULTI_GPU_SHARDINGS)
    per_rank = request.workload.global_batch_size // world
    attention_impl = o.attention_impl or attention_impl_for(request.model)
    targets = o.lora_targets or ("all-linear",)
    # The dropout that runs: peft's ParamWrapper (an MoE's experts) has none (schemas/lora_targets.py).
    asked_dropout = (
        o.lora_dropout if o.lora_dropout is not None else TrainingSetting.model_fields["lora_dropout"].default
    )
    dropout = effective_lora_dropout(request.model.model_type, targets, asked_dropout)
    # one value each: the default unless forced (liger only when asked: its speed on the core is not measured)
    adapter_dtype = o.adapter_dtype or TrainingSetting.model_fields["adapter_dtype"].default
    kernels = o.kernels or TrainingSetting.model_fields["kernels"].default
    if o.grad_sync == "every-micro-step":
        shardings = tuple(s for s in shardings if s in FSDP_SHARDINGS)
    for method in methods:
        for sharding in shardings:
            for micro in micro_batch_sizes(request):
                for grad_ckpt in _choices(o.grad_ckpt, (False, True)):
                    for compile_ in _choices(o.compile, (False, True)):
                        for optimizer in optimizers:
                            if optimizer != "adamw" and (sharding in ZERO_SHARDINGS or sharding in OFFLOAD_SHARDINGS):
                                continue  # DeepSpeed / CPU offload use their own (CPU-)Adam, not bnb 8-bit
                            for loss_impl in _choices(o.loss_impl, LOSS_IMPLEMENTATIONS):
                                if loss_impl == "chunked" and sharding in PARAMETER_SHARDINGS:
                                    continue  # the chunked loss reads the whole lm_head weight (trainer/hf_args.py)
                                for grad_sync in grad_syncs(request, sharding, per_rank // micro):
                                    if offload_accumulation_error(sharding, per_rank // micro, grad_sync, world):
                                        continue  # FSDP CPU offload would drop all but the last micro-batch
                                    for in_backward in optimizer_in_backward_choices(
                                        request, method, sharding, per_rank // micro
                                    ):
                                        yield from setting_variants(
                                            request,
                                            TrainingSetting(
                                                method=method,
                                                micro_batch_size=micro,
                                                grad_accum=per_rank // micro,
                                                grad_ckpt=grad_ckpt,
                                                compile=compile_,
                                                sharding=sharding,
                                                optimizer=optimizer,
                                                precision=precision,
                                                lora_rank=o.lora_rank or DEFAULT_LORA_RANK,
                                                lora_alpha=o.lora_alpha or DEFAULT_LORA_ALPHA,
                                                lora_targets=targets,
                                                lora_dropout=dropout,
                                                adapter_dtype=adapter_dtype,
                                                kernels=kernels,
                                                loss_impl=loss_impl,
                                                attention_impl=attention_impl,
                                                grad_sync=grad_sync,
                                                optimizer_in_backward=in_backward,
                                                fp8=bool(o.fp8),
                                            ),
                                        )


def setting_variants(request: PlanRequest, setting: TrainingSetting) -> Iterator[TrainingSetting]:
    """``setting`` and its variants: precisions, FP8 linears and the memory levers, where the search offers them.

    Each variant comes with the memory levers where they run (:func:`lever_choices`).
    A forced ``--precision`` or ``--fp8`` / ``--no-fp8`` is kept. ``precision_choice.precision_choices``: bf16 mixed
    precision beside pure bf16 for full fine-tuning; ``fp8_choice.fp8_choices``: FP8 beside bf16 where public FP8
    training figures back it.
    """
    precisions: tuple[Precision, ...] = (setting.precision,)
    if request.overrides.precision is None:
        precisions = precision_choices(setting.precision, setting.method, setting.sharding)
    for precision in precisions:
        for fp8 in fp8_choices(request, setting.method):
            yield from lever_choices(request, setting.model_copy(update={"precision": precision, "fp8": fp8}))
