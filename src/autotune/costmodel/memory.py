"""Peak GPU memory per rank: model states (weights, gradients, optimizer), sharding, and peak phases.

Model states follow Rajbhandari et al. 2020 (ZeRO, section 3 and figure 1): ZeRO-2 shards gradients
and optimizer states over the N data-parallel ranks, ZeRO-3 and FSDP FULL_SHARD (Zhao et al. 2023,
"PyTorch FSDP", section 3) also shard the parameters and all-gather one wrapped unit (a decoder layer)
at a time — we keep two units live (the current one and the prefetched next, FSDP's default
``BACKWARD_PRE`` prefetch) plus the root unit (embeddings, lm_head, final norm). CPU offload
(FSDP ``CPUOffload(offload_params=True)``, ZeRO-Offload: Ren et al. 2021) moves parameters, gradients
and optimizer states to host RAM. DDP keeps a second copy of the gradients in its communication buckets
(PyTorch DDP, Li et al. 2020, section 4.2; ``gradient_as_bucket_view=False``).

The peak is the largest of these phases:
  A. start of backward: resident states + persistent gradients (only with accumulation > 1) + all stored
     activations + the logits/cross-entropy peak;
  B0. early backward (activation checkpointing): resident states + every layer's checkpointed input + the
     first recomputed layer and its transients (``activations.working_activation_bytes_per_token``);
  B. late backward: resident states + all gradients + one layer's working activations;
  C. optimizer step: resident states + all gradients + the optimizer's temporary buffers.
  D. end of a compiled backward (torch.compile, one GPU): resident states + the gradients accumulated by earlier
     micro-steps + every trainable parameter's new gradient at once + inductor's fp32 embedding-gradient buffer
     (``compiled_backward_extra_bytes``).
  E. eval forward (only when the workload prices an eval loss): resident states (gradients are freed by the
     optimizer step's ``zero_grad(set_to_none=True)``) + one layer's working set + the eval's logits and loss
     (:func:`eval_logits_bytes`: the full logits under Liger, whose fused loss runs in training only).
Optimizer in backward (``optimizer_in_backward``): each parameter is stepped by its post-accumulate-grad hook and its
gradient freed at once (PyTorch tutorial "How to save memory by fusing the optimizer step into the backward pass";
torchtune ``optimizer_in_bwd``), so at most one parameter's gradient and step buffer are alive — the largest trainable
tensor's (``largest_trainable_tensor_params``) — and there is no separate optimizer-step phase (phase C).
Activation offloading (``activation_offloading``): the layers' saved sets leave phases A and B0 and one comes back
beside the working set of B (``activation_offload``), the host holding them all.
Paged 8-bit AdamW: bitsandbytes allocates the moments of every parameter of at least 100,000 elements with
``cudaMallocManaged`` (``Optimizer8bit.get_state_buffer`` → ``F.get_paged``): unified memory outside PyTorch's caching
allocator, which ``torch.cuda.max_memory_allocated`` does not count and the driver evicts to the host when the card
is full (CUDA C++ Programming Guide, "Unified Memory": oversubscription). Those states are ``paged_optimizer_bytes``,
outside the allocated peak; what does not fit beside the reserved peak is priced as PCIe traffic by
``step_time.optimizer_paging_s``.
FSDP with gradient accumulation (``grad_sync`` last-micro-step): the HF Trainer runs every micro-step but the last
under ``no_sync``
(``transformers.Trainer`` training loop → ``Accelerator.no_sync`` → FSDP1 ``no_sync()`` / FSDP2
``set_requires_gradient_sync(False)``), and FSDP then "accumulates the full model gradients (instead of gradient
shards) until the eventual sync" (torch ``FullyShardedDataParallel.no_sync`` docstring): the unsharded gradient of
every unit stays on every GPU, in the dtype autograd produced it in (the gathered parameters' dtype: 16-bit under
FSDP mixed precision; ``_runtime_utils._post_backward_hook`` returns before any cast when not syncing). It is held
in phases A, B0 and B (not in C: the last micro-step reduce-scatters it); ``unsharded_gradients``.
FSDP CPU offload on one GPU holds the forward's weight copies until the backward (``held_weights``): FSDP1 clamps
FULL_SHARD to NO_SHARD at world size 1 (torch ``fsdp/_init_utils.py``: "FSDP is switching to use NO_SHARD ... since the
world size is 1"); NO_SHARD does not free after forward (``_post_forward_reshard`` frees only
``RESHARD_AFTER_FORWARD_HANDLE_STRATEGIES``), it only points the flat parameter back at its pinned CPU shard, while
the device copy ``pre_unshard`` made (``flat_param_to(device)``, a new tensor) stays referenced by the tensors autograd
saved for backward. Without parameter mixed precision (weights stored in the compute dtype; under autocast FSDP's
low-precision copy is freed by ``post_reshard``) and without activation checkpointing (a checkpointed layer saves no
weights), every unit's copy is alive at the start of the backward (phases A and B0), beside the units the backward
copies in again. The core's only offload run on one GPU measured it: Llama-3-8B LoRA, 33.29 GiB allocated against
17.10 GiB predicted without this term, 32.06 GiB with it (``profiles/measurements/autotune-core-h200``).
Allocated bytes (what ``torch.cuda.max_memory_allocated`` counts) are modelled; reserved memory adds the
caching allocator's fragmentation (a fitted fraction) and the CUDA context is outside both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

from autotune.costmodel import activations as act
from autotune.costmodel.activation_offload import offloaded_activations
from autotune.costmodel.context import SettingContext, setting_context
from autotune.costmodel.optimizer_memory import (
    EIGHT_BIT_MOMENTS_BYTES,
    EMBEDDING_32BIT_STATE_BYTES,
    largest_trainable_tensor_params,
    late_embedding_gradient_bytes,
    paged_optimizer_bytes,
    unpaged_params,
)
from autotune.costmodel.param_adapters import merged_gradient_bytes, merged_weight_bytes_per_layer
from autotune.costmodel.params import ParamCounts
from autotune.costmodel.precision import DtypeBytes
from autotune.schemas.calibration import CostCoefficients
from autotune.schemas.hardware import ClusterSpec, GpuSpec
from autotune.schemas.memory_parts import MemoryPart
from autotune.schemas.model import ModelSpec
from autotune.schemas.setting import TrainingSetting
from autotune.schemas.workload import EvalSet, Workload
from autotune.units import nf4_bytes_per_param

FSDP_LIVE_UNITS = 2
"""Decoder-layer units gathered at once under FSDP / ZeRO-3 (current + prefetched)."""

HOPPER_CUBLAS_WORKSPACE_BYTES = 4096 * 8 * 1024
"""cuBLAS workspace per handle on Hopper: ``CUBLAS_WORKSPACE_CONFIG`` default ``:4096:8`` (32 MiB;
``aten/src/ATen/cuda/CublasHandlePool.cpp``, ``getChosenWorkspaceSize``)."""
DEFAULT_CUBLAS_WORKSPACE_BYTES = 4096 * 1024 * 2 + 16 * 1024 * 8
"""cuBLAS workspace per handle on other GPUs: default ``:4096:2:16:8`` (8 MiB + 128 KiB; same source)."""
CUBLAS_HANDLES = 2
"""Training holds two cuBLAS handles with a workspace each: the forward thread's and the autograd engine's
device thread's (handles are per thread and stream)."""


def cublas_workspace_bytes(gpu: GpuSpec) -> float:
    """The cuBLAS workspaces a training step holds in the caching allocator (counted by max_memory_allocated)."""
    per_handle = HOPPER_CUBLAS_WORKSPACE_BYTES if gpu.generation == "hopper" else DEFAULT_CUBLAS_WORKSPACE_BYTES
    return float(CUBLAS_HANDLES * per_handle)


def compiled_backward_extra_bytes(
    model: ModelSpec, setting: TrainingSetting, dtypes: DtypeBytes, gradient_bytes: float
) -> tuple[float, float]:
    """(new gradients, embedding-gradient buffer) bytes alive at the end of a compiled backward (phase D).

    Under ``torch.compile`` AOTAutograd runs the whole backward as one compiled function that returns every
    parameter's gradient at its end; autograd's ``AccumulateGrad`` adds them into ``.grad`` only afterwards
    (torch ``_functorch/_aot_autograd/runtime_wrappers.py``, ``CompiledFunction.backward``). So with gradients
    accumulated from earlier micro-steps, the new gradients (``gradient_bytes``, all trainable ones) sit beside them.
    The last op of that backward is the embedding's: inductor lowers ``embedding_dense_backward`` through its
    decomposition (``torch/_decomp/decompositions.py``), which accumulates in the computation dtype (fp32 for bf16 /
    fp16 gradients: ``vocab × hidden × 4`` bytes) and casts the result, so that buffer is alive with all the others.
    Only where the embedding trains (full fine-tuning) and gradients are 16-bit. Measured: the core's compiled full
    run of Llama-3-8B (H100, adamw-8bit, 32 micro-steps) peaks at 65.50 GiB after its first optimizer step; this
    phase predicts 65.0. Single GPU only: DDP splits the compiled graph at its buckets (dynamo's DDPOptimizer) and
    FSDP / ZeRO-3 manage their own gradients. Raises nothing; (0, 0) where it does not apply.
    """
    if not setting.compile or setting.sharding != "none":
        return 0.0, 0.0
    embedding_trains = not setting.uses_adapters
    buffer = model.vocab_size * model.hidden_size * 4.0 if embedding_trains and dtypes.grad_bytes < 4 else 0.0
    return gradient_bytes, buffer


@dataclass(frozen=True)
class ModelStateBytes:
    """Model-state bytes per GPU rank (after sharding / offload), and host bytes per rank.

    Attributes:
        weights: base (or full) weights resident on the GPU (quantized for QLoRA).
        adapter_weights: LoRA adapter weights (``DtypeBytes.adapter_bytes`` each).
        gathered_weights: transient unsharded units under FSDP / ZeRO-3 (two layers + root unit).
        gradients: gradients of trainable parameters.
        optimizer_states: optimizer state (moments, and a master copy where one exists).
        optimizer_temp: the optimizer step's temporary buffer.
        ddp_buckets: DDP's gradient bucket copy.
        unsharded_gradients: FSDP's full (unsharded) gradients kept by ``no_sync`` during gradient accumulation
            (module docstring); 0 without FSDP or with ``grad_accum`` 1.
        autocast_weight_copies: 16-bit weight copies cached by autocast during forward/backward.
        host_per_rank: host RAM for offloaded states, per rank.
        held_weights: the forward's device copies of offloaded weights that autograd keeps until the backward (FSDP
            CPU offload on one GPU without checkpointing or parameter mixed precision; module docstring); counted
            under "gathered weights" in phases A and B0.
        paged_optimizer: paged 8-bit optimizer states in managed memory, outside the allocated peak (module
            docstring); 0 for other optimizers.
    """

    weights: float
    adapter_weights: float
    gathered_weights: float
    gradients: float
    optimizer_states: float
    optimizer_temp: float
    ddp_buckets: float
    autocast_weight_copies: float
    host_per_rank: float
    unsharded_gradients: float = 0.0
    held_weights: float = 0.0
    paged_optimizer: float = 0.0


@dataclass(frozen=True)
class MemoryPrediction:
    """Predicted allocated peak per GPU and its parts (bytes), the phase it happens in, and host bytes.

    ``phases_bytes`` holds every phase's parts (the peak phase's are ``breakdown_bytes``), so that an error band on
    the modelled parts is applied to each phase, not only to the one with the largest point prediction
    (``estimate.banded_peak_bytes``).
    """

    peak_allocated_bytes: float
    peak_phase: str
    breakdown_bytes: dict[str, float] = field(default_factory=dict)
    host_bytes_per_node: float = 0.0
    reserved_bytes: float = 0.0
    phases_bytes: dict[str, dict[str, float]] = field(default_factory=dict)
    paged_optimizer_bytes: float = 0.0


def base_weight_bytes(model: ModelSpec, counts: ParamCounts, setting: TrainingSetting, dtypes: DtypeBytes) -> float:
    """Bytes of the (unsharded) base weights.

    QLoRA stores every decoder linear in NF4 with its constants (``units.nf4_bytes_per_param``,
    Dettmers et al. 2023) and keeps embeddings, norms, biases and lm_head in ``unquantized_dtype``.
    """
    if setting.method == "qlora":
        unquantized = 4.0 if setting.unquantized_dtype == "fp32" else 2.0
        return counts.decoder_linear_params * nf4_bytes_per_param(setting.qlora_double_quant) + (
            counts.non_linear_params * unquantized
        )
    return counts.total_params * dtypes.weight_bytes


def _gathered_weight_bytes(counts: ParamCounts, weights: float, dtypes: DtypeBytes, ranks: int, offload: bool) -> float:
    """Bytes of the units FSDP / ZeRO-3 gathers at once: ``FSDP_LIVE_UNITS`` decoder layers and the root's parameters.

    Gathered in the compute dtype under autocast (FSDP MixedPrecision), else as stored (``weights`` / parameters:
    the NF4-aware average). The rank's own shard is resident (counted in ``weights``) unless offloaded to the host,
    in which case whole units are copied in. A unit's parameters: :attr:`ParamCounts.layer_params` (a decoder layer,
    its norms included) and :attr:`ParamCounts.root_params`, the split the time terms use too.
    """
    unit_bytes = weights / counts.total_params
    gather_bytes = min(unit_bytes, dtypes.compute_bytes) if dtypes.autocast else unit_bytes
    not_resident = 1.0 if offload else 1 - 1 / ranks
    return (FSDP_LIVE_UNITS * counts.layer_params + counts.root_params) * gather_bytes * not_resident


def model_state_bytes(
    model: ModelSpec,
    setting: TrainingSetting,
    cluster: ClusterSpec,
    dtypes: DtypeBytes,
    context: SettingContext,
) -> ModelStateBytes:
    """Per-rank model-state bytes for a setting (formulas in the module docstring).

    ``context``: the setting's derived facts (``SettingContext``): its counted and trainable parameters.
    """
    counts = context.counts
    ranks = cluster.world_size
    sharding = setting.sharding
    weights = base_weight_bytes(model, counts, setting, dtypes)
    trainable = context.trainable_params
    adapter_weights = trainable * dtypes.adapter_bytes if setting.uses_adapters else 0.0
    gradients = trainable * dtypes.grad_bytes
    optimizer = trainable * dtypes.optimizer_bytes
    if setting.optimizer == "adamw-8bit" and not setting.uses_adapters and not setting.shards_states:
        # the HF Trainer keeps the embedding's Adam states in 32 bits under a bitsandbytes 8-bit optimizer
        optimizer += counts.embedding_params * (EMBEDDING_32BIT_STATE_BYTES - dtypes.optimizer_bytes)
    optimizer_temp = trainable * dtypes.optimizer_temp_bytes
    paged = paged_optimizer_bytes(model, setting, counts, dtypes)
    if paged:  # the small tensors' states and the block absmax stay on the allocator
        eight_bit = counts.total_params - unpaged_params(counts) - counts.embedding_params
        optimizer = unpaged_params(counts) * dtypes.optimizer_bytes
        optimizer += eight_bit * (dtypes.optimizer_bytes - EIGHT_BIT_MOMENTS_BYTES)
    if setting.optimizer_in_backward:  # one parameter's gradient and step buffer at a time
        largest = largest_trainable_tensor_params(model, setting, counts)
        gradients = largest * dtypes.grad_bytes
        optimizer_temp = largest * dtypes.optimizer_temp_bytes

    shard_params = setting.shards_parameters
    offload = setting.offloads_to_cpu
    held = weights if holds_forward_weight_copies(setting, ranks, dtypes) else 0.0
    gathered = 0.0
    if shard_params:
        gathered = _gathered_weight_bytes(counts, weights, dtypes, ranks, offload)
        weights /= ranks
        adapter_weights /= ranks
    if setting.shards_states:
        gradients /= ranks
        optimizer /= ranks
        optimizer_temp /= ranks
    host = 0.0
    if offload:
        host = weights + adapter_weights + gradients + optimizer + optimizer_temp
        if not setting.uses_adapters and dtypes.weight_bytes < 4.0:
            host += trainable / ranks * 4.0  # fp32 master copy for the CPU optimizer
        weights, adapter_weights, gradients, optimizer, optimizer_temp = 0.0, 0.0, 0.0, 0.0, 0.0
    ddp_buckets = gradients if sharding == "ddp" and ranks > 1 else 0.0
    unsharded_gradients = 0.0
    if setting.uses_fsdp and setting.grad_accum > 1 and ranks > 1 and setting.grad_sync == "last-micro-step":
        unsharded_gradients = trainable * dtypes.compute_bytes  # the gathered dtype: 16-bit under MixedPrecision
    autocast_copies = 0.0
    if dtypes.autocast and not setting.uses_adapters and not shard_params:
        autocast_copies = counts.total_params * dtypes.compute_bytes
    return ModelStateBytes(
        weights=weights,
        adapter_weights=adapter_weights,
        gathered_weights=gathered,
        gradients=gradients,
        optimizer_states=optimizer,
        optimizer_temp=optimizer_temp,
        ddp_buckets=ddp_buckets,
        autocast_weight_copies=autocast_copies,
        host_per_rank=host,
        unsharded_gradients=unsharded_gradients,
        held_weights=held,
        paged_optimizer=paged,
    )


def holds_forward_weight_copies(setting: TrainingSetting, ranks: int, dtypes: DtypeBytes) -> bool:
    """Whether the forward's device copies of CPU-offloaded weights stay alive until the backward (module docstring).

    True for FSDP CPU offload on one rank (FSDP1's NO_SHARD) without activation checkpointing and without parameter
    mixed precision (``dtypes.autocast`` False: the weights are stored in the dtype they compute in). DeepSpeed
    ZeRO-3 offload releases a module's parameters after use (``partitioned_param`` storage freed) and is never held.
    """
    return setting.sharding == "fsdp-offload" and ranks == 1 and not setting.grad_ckpt and not dtypes.autocast


def predict_memory(
    model: ModelSpec,
    setting: TrainingSetting,
    cluster: ClusterSpec,
    workload: Workload,
    coefficients: CostCoefficients,
) -> MemoryPrediction:
    """Peak allocated bytes per GPU for one setting: :func:`predict_memory_in` of its :class:`SettingContext`."""
    return predict_memory_in(setting_context(model, setting, cluster, workload), coefficients)


@dataclass(frozen=True)
class ActivationTerms:
    """Per-rank activation bytes of one micro batch, as the memory phases read them.

    Attributes:
        stored: every layer's saved set (with the attention masks; without checkpointing, each layer's merged
            expert weights too).
        working: one layer's backward working set (with checkpointing: its recompute and merged weights).
        logits: the logits and the loss's copies (:func:`activations.logits_peak_bytes`).
        checkpoints: the checkpointed layers' inputs and the masks (early backward).
        merged_grad: an MoE's merged-weight gradient of one layer (``param_adapters.merged_gradient_bytes``).
    """

    stored: float
    working: float
    logits: float
    checkpoints: float
    merged_grad: float


def activation_terms(context: SettingContext) -> ActivationTerms:
    """The activation bytes of ``context``'s micro batch (derivation: :mod:`autotune.costmodel.activations`).

    Sized for the longest micro batch (``peak_seq_tokens``: padded batches peak at their longest example's length).
    """
    model, setting, dtypes = context.model, context.setting, context.dtypes
    seq_tokens, tokens, flash, fused, lora = (
        context.peak_seq_tokens,
        context.peak_tokens,
        context.flash_attention,
        context.fused,
        context.lora,
    )
    masked = context.masked_attention
    layer = act.layer_activation_bytes_per_token(
        model, setting, dtypes, seq_tokens, flash, fused, lora=lora, masked_attention=masked
    )
    stored = act.stored_activation_bytes_per_token(model, setting, layer, dtypes, fused) * tokens
    working = act.working_activation_bytes_per_token(model, setting, layer, dtypes, seq_tokens, flash, fused, lora=lora)
    working *= tokens
    masks = act.mask_bytes(model, setting.micro_batch_size, seq_tokens, flash, dtypes.residual_bytes, masked)
    # LoRA folded into an MoE's expert weights keeps each layer's merged weights for backward; checkpointing
    # holds one recomputed layer's (autotune.costmodel.param_adapters)
    merged = merged_weight_bytes_per_layer(model, setting, dtypes, lora)
    merged_grad = merged_gradient_bytes(model, setting, dtypes, lora)
    if setting.grad_ckpt:
        working += merged + merged_grad
    else:
        stored += model.num_hidden_layers * merged
    # In early backward the embedding output and the final norm's saved input are already freed; the masks are
    # inputs of every checkpointed layer.
    checkpoints = model.num_hidden_layers * dtypes.residual_bytes * model.hidden_size * tokens + masks
    offloaded = offloaded_activations(context, peak=True)  # the layers' saved sets on the host, one back at a time
    return ActivationTerms(
        stored=stored + masks - offloaded.gpu_freed_bytes,
        working=working + offloaded.layer_bytes,
        logits=act.logits_peak_bytes(model, setting, dtypes, tokens, fused),
        checkpoints=checkpoints,
        merged_grad=merged_grad,
    )


def memory_phases(
    context: SettingContext, states: ModelStateBytes, acts: ActivationTerms
) -> dict[str, dict[MemoryPart, float]]:
    """The memory phases of one optimizer step (A, B0, B, C and, compiled, D in the module docstring), by part."""
    model, setting, dtypes = context.model, context.setting, context.dtypes
    resident: dict[MemoryPart, float] = {
        "weights": states.weights,
        "lora adapters": states.adapter_weights,
        "optimizer states": states.optimizer_states,
        "cuBLAS workspaces": cublas_workspace_bytes(context.cluster.gpu),
    }
    persistent_grads = states.gradients if setting.grad_accum > 1 else 0.0
    if states.unsharded_gradients:  # no_sync: only the unsharded gradients persist between micro-steps
        persistent_grads = states.unsharded_gradients
    between_micro_steps: dict[MemoryPart, float] = {
        **resident,
        "gathered weights": states.gathered_weights + states.held_weights,
        "gradients": persistent_grads,
        "ddp buckets": states.ddp_buckets if setting.grad_accum > 1 else 0.0,
        "autocast weight copies": states.autocast_weight_copies,
    }
    # early backward without checkpointing: the last layer's backward with every layer's saved set alive (logits freed)
    early = (
        acts.checkpoints + acts.working
        if setting.grad_ckpt
        else (acts.stored + acts.merged_grad if acts.merged_grad else 0.0)
    )
    phases: dict[str, dict[MemoryPart, float]] = {
        "forward/backward": {**between_micro_steps, "activations": acts.stored, "logits + loss": acts.logits},
        "early backward": {**between_micro_steps, "activations": early},
        "late backward": {
            **resident,
            "gathered weights": states.gathered_weights,
            "gradients": states.gradients
            + states.unsharded_gradients
            - late_embedding_gradient_bytes(model, setting, context.counts, dtypes),
            "ddp buckets": states.ddp_buckets,
            "autocast weight copies": states.autocast_weight_copies,
            "activations": acts.working,
        },
        "optimizer step": {
            **resident,
            "gradients": states.gradients,
            "ddp buckets": states.ddp_buckets,
            "optimizer step buffers": states.optimizer_temp,
        },
    }
    if setting.optimizer_in_backward:  # each parameter is stepped in the backward, beside one layer's working set
        phases["late backward"]["optimizer step buffers"] = states.optimizer_temp
        del phases["optimizer step"]
    match context.workload.eval:
        case EvalSet(samples=int()):  # an eval set of known size: its forward is a phase
            phases["eval forward"] = {
                **resident,
                "activations": acts.working,
                "logits + loss": eval_logits_bytes(context, acts),
            }
    new_gradients, embedding_buffer = compiled_backward_extra_bytes(model, setting, dtypes, states.gradients)
    if new_gradients:
        phases["end of compiled backward"] = {
            **resident,
            "gradients": persistent_grads,
            "compiled backward gradients": new_gradients,
            "autocast weight copies": states.autocast_weight_copies,
            "embedding gradient buffer": embedding_buffer,
        }
    return phases


def eval_logits_bytes(context: SettingContext, acts: ActivationTerms) -> float:
    """The logits and loss of one eval micro batch (``plan --eval-*``), bytes.

    The training path's, except under Liger's fused linear cross-entropy, which runs in training only (its
    ``lce_forward`` computes the full logits and transformers' loss when ``self.training`` is false), so eval holds
    the unfused fp32-upcast loss's logits (``activations.logits_peak_bytes`` without fused kernels). The chunked
    loss also runs in eval (the core's ``compute_loss``).
    """
    if not context.fused.linear_cross_entropy:
        return acts.logits
    unfused = context.setting.model_copy(update={"loss_impl": "fp32-upcast"})
    return act.logits_peak_bytes(context.model, unfused, context.dtypes, context.peak_tokens)


def predict_memory_in(context: SettingContext, coefficients: CostCoefficients) -> MemoryPrediction:
    """Peak allocated bytes per GPU (max of phases A, B0, B, C, D in the module docstring), with its breakdown.

    Activation and logits terms are derived (no fitted multiplier; ``benchmarks/trace_agreement.py`` compares
    them with the traced training step); the cuBLAS workspaces are added to every phase; reserved =
    allocated × (1 + ``allocator_overhead_fraction``), the one fitted memory term. Whether attention
    materialises the scores is the context's ``flash_attention`` (the rule the time model uses too).
    """
    cluster = context.cluster
    states = model_state_bytes(context.model, context.setting, cluster, context.dtypes, context)
    phases = memory_phases(context, states, activation_terms(context))
    phase_name, parts = max(phases.items(), key=lambda item: sum(item[1].values()))
    peak = sum(parts.values())
    ranks_per_node = cluster.num_gpus_per_node
    return MemoryPrediction(
        peak_allocated_bytes=peak,
        peak_phase=phase_name,
        breakdown_bytes={name: value for name, value in parts.items() if value > 0},
        host_bytes_per_node=(states.host_per_rank + offloaded_activations(context, peak=True).moved_bytes)
        * ranks_per_node,
        reserved_bytes=peak * (1 + coefficients.allocator_overhead_fraction),
        phases_bytes=cast("dict[str, dict[str, float]]", phases),  # part names are str: no copy per candidate
        paged_optimizer_bytes=states.paged_optimizer,
    )
