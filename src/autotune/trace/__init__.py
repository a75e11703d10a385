"""Trace the training core on the CPU: the real model, fake tensors, one step, live bytes per phase.

``trace_training_step`` builds the model exactly as ``autotune launch`` would (:mod:`.build`), makes
its parameters fake CPU tensors (no weights, no GPU), runs forward + backward + one optimizer step of one
micro batch (:mod:`.step`) under a dispatch mode that sees every storage born and freed (:mod:`.tracker`)
and reports the peak of live tensor bytes per phase by category, and ops / FLOPs / bytes moved per op
class. QLoRA layers are the stand-in of :mod:`.qlora`.

Modules:
  build      the training core's model on the meta device, wrapped as the trainer does, made fake
  step       one training step of one micro batch on the fake model, under the tracker
  tracker    the dispatch mode that sees every storage born and freed: live bytes per phase and category
  qlora      the stand-in for bitsandbytes' Linear4bit on fake tensors
  cuda       the CUDA code paths (dropout, attention masks) taken on the CPU
  agreement  the analytic memory model against the traced step (depth extrapolation, traced peaks)

How a storage is classified (at the phase's peak):
  weights / adapters — parameters and buffers (trainable parameters of an adapter method are adapters;
  QLoRA's packed weights and quantization constants are weights); gradients — storages that end as
  ``.grad``; optimizer states — what the optimizer keeps after its step; logits + loss — born from the
  output head on in forward, or in backward until the head's input gets its gradient; saved activations —
  born in forward (elsewhere) and alive at the end of forward; recomputed activations — born inside a module
  forward during backward (activation checkpointing); temporaries — everything else.

CUDA vs this CPU trace (modelled in ``cuda_peak_allocated_bytes``):
  * allocator rounding — each storage rounded up to 512 B (``tracker.CUDA_BLOCK_BYTES``);
  * cuBLAS / cuBLASLt workspace — allocated through the caching allocator, one per (handle, stream): the
    forward thread and the autograd engine's device thread hold one each; size ``CUBLAS_WORKSPACE_CONFIG``
    default ``:4096:8`` (32 MiB) on Hopper, ``:4096:2:16:8`` (8 MiB + 128 KiB) elsewhere
    (``aten/src/ATen/cuda/CublasHandlePool.cpp``, ``getChosenWorkspaceSize``; the constants live in
    ``autotune.costmodel.memory``);
  * steady state — the traced step is the first, so its forward and backward run before any optimizer
    state exists; from the second step on they also hold it: the forward and backward peaks add the
    optimizer states the step created (gradients are freed by ``zero_grad(set_to_none=True)``).
  * SDPA — on the CPU ``scaled_dot_product_attention`` runs ``_scaled_dot_product_flash_attention_for_cpu``,
    which saves q, k, v, the output and an fp32 log-sum-exp (b, n, s), as CUDA's flash kernel does (plus its
    16-byte Philox seed/offset); the memory-efficient kernel (fp32, masks) pads the log-sum-exp to a multiple
    of 32 rows: ≤ b·n·32·4 bytes per layer, below the rounding. Eager attention is the same ops on both.
  * dropout and attention masks — the CUDA code paths are taken (:mod:`.cuda`);
  * autocast — the CPU autocast policy is used in the compute dtype; its lower-precision op list covers the
    same matmuls as CUDA's (``aten/src/ATen/autocast_mode.cpp``), but its fp32 list does not: on the CPU
    ``pow``, ``layer_norm`` and ``softmax`` stay in bf16, where CUDA runs them in fp32 (PyTorch AMP docs, "CUDA Ops
    that can autocast to float32"), so a mixed-precision trace of a LayerNorm model or of ``gelu_new`` under-counts
    what CUDA saves (RMSNorm upcasts by hand and eager attention's softmax passes its dtype, so Llama-style layers
    are traced as CUDA runs them).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from autotune.schemas.hardware import ClusterSpec
from autotune.schemas.model import ModelSpec
from autotune.schemas.setting import TrainingSetting
from autotune.schemas.trace import CATEGORIES, OpClassStats, PhaseTrace, TraceReport
from autotune.trace.build import build_meta_model, config_from_spec, materialize_fake, trace_precision
from autotune.trace.cuda import cuda_code_paths
from autotune.trace.step import run_step
from autotune.trace.tracker import PHASES, LiveBytesTracker, StorageRecord, cuda_rounded

STEADY_STATE_PHASES = ("forward", "backward")
"""Phases that, from the second step on, also hold the optimizer states (the traced step is the first)."""


def cublas_workspace(cluster: ClusterSpec | None) -> int:
    """The cuBLAS workspaces of the cluster's GPU (``costmodel.memory.cublas_workspace_bytes``; none → non-Hopper)."""
    from autotune.costmodel.memory import CUBLAS_HANDLES, DEFAULT_CUBLAS_WORKSPACE_BYTES, cublas_workspace_bytes

    if cluster is None:
        return CUBLAS_HANDLES * DEFAULT_CUBLAS_WORKSPACE_BYTES
    return int(cublas_workspace_bytes(cluster.gpu))


def _classify(index: int, record: StorageRecord, saved: set[int]) -> str:
    if record.label is not None:
        return record.label
    if record.phase == "forward":
        if record.region == "loss":
            return "logits + loss"
        return "saved activations" if index in saved else "temporaries"
    if record.phase == "backward":
        if record.recompute:
            return "recomputed activations"
        if record.region == "loss":
            return "logits + loss"
    return "temporaries"


def _register_model(tracker: LiveBytesTracker, model: torch.nn.Module, adapters: bool) -> None:
    from autotune.trace.qlora import TracedLinear4bit

    for param in model.parameters():
        tracker.register(param, "adapters" if adapters and param.requires_grad else "weights")
    for buffer in model.buffers():
        tracker.register(buffer, "weights")
    for module in model.modules():
        if isinstance(module, TracedLinear4bit):
            for tensor in module.trace_state.tensors:
                tracker.register(tensor, "weights")


BUILD_INDEPENDENT_FIELDS = (
    "micro_batch_size",
    "grad_accum",
    "loss_impl",
    "optimizer",
    "sharding",
    "compile",
    "optimizer_in_backward",
    "bf16_stochastic_rounding",
    "activation_offloading",
)
"""Setting fields that do not change the built model (a :class:`TracedModel` serves every value of them)."""


@dataclass
class TracedModel:
    """The trainer's model built on the meta device and made fake (:mod:`.build`), ready to trace steps.

    One build serves every setting that differs only in ``BUILD_INDEPENDENT_FIELDS`` (micro batch, loss
    implementation, optimizer, sharding...): each traced step starts from the same parameters with no
    gradients and a new optimizer, so reusing it measures exactly what a fresh build would.
    """

    spec: ModelSpec
    build_key: tuple[Any, ...]
    model: torch.nn.Module
    fake_mode: FakeTensorMode


def build_key(setting: TrainingSetting) -> tuple[Any, ...]:
    """The setting's fields that shape the built model (all but ``BUILD_INDEPENDENT_FIELDS``)."""
    fields = setting.model_dump(exclude=set(BUILD_INDEPENDENT_FIELDS))
    return tuple(sorted((name, repr(value)) for name, value in fields.items()))


def build_traced_model(spec: ModelSpec, setting: TrainingSetting, source: str | None = None) -> TracedModel:
    """Build the training core's model for ``setting`` on fake tensors (see :func:`trace_training_step`).

    Raises:
        ConfigError: transformers cannot build the architecture or the LoRA targets do not fit it.
    """
    config = config_from_spec(spec, source)
    model = build_meta_model(config, setting)
    fake_mode = FakeTensorMode(allow_non_fake_inputs=False)
    materialize_fake(model, fake_mode, setting)
    return TracedModel(spec=spec, build_key=build_key(setting), model=model, fake_mode=fake_mode)


def trace_training_step(
    spec: ModelSpec,
    setting: TrainingSetting,
    seq_len: int,
    cluster: ClusterSpec | None = None,
    source: str | None = None,
    built: TracedModel | None = None,
) -> TraceReport:
    """Trace one training step of one micro batch of ``seq_len`` tokens per sequence on one rank.

    Args:
        spec: the model's shapes (catalog entry or read config.json).
        setting: the training setting (method, micro batch, checkpointing, loss, optimizer, precision...).
        seq_len: tokens per sequence.
        cluster: the GPUs (cuBLAS workspace size, sharding arithmetic); None = one non-Hopper GPU.
        source: a local config.json / model directory to build from instead of the catalog shapes.
        built: a model from :func:`build_traced_model` for the same spec and build key, reused instead
            of building one (the step is traced the same way; ``benchmarks/trace_agreement.py`` uses it).

    Returns:
        The per-phase peaks, categories, op statistics and the predicted CUDA allocated peak (bytes).

    Raises:
        ConfigError: transformers cannot build the architecture or the LoRA targets do not fit it.
        ValueError: ``built`` was made for another model or build key.
    """
    from autotune.trainer.model import count_parameters

    started = time.perf_counter()
    if built is None:
        built = build_traced_model(spec, setting, source)
    elif built.spec != spec or built.build_key != build_key(setting):
        raise ValueError("the built model was made for another model or setting; build one for this setting")
    model, fake_mode = built.model, built.fake_mode
    precision = trace_precision(setting)
    autocast_dtype = None
    if precision.bf16 or precision.fp16:
        autocast_dtype = torch.float16 if precision.fp16 else torch.bfloat16
    tracker = LiveBytesTracker()
    with fake_mode:
        input_ids = torch.zeros((setting.micro_batch_size, seq_len), dtype=torch.long)
    try:
        with fake_mode, tracker, cuda_code_paths():
            _register_model(tracker, model, setting.uses_adapters)
            tracker.register(input_ids, "temporaries")
            state = run_step(model, setting, tracker, input_ids, autocast_dtype)
    finally:
        for param in model.parameters():  # the next step traced on this model starts without gradients
            param.grad = None
    state_bytes = sum(cuda_rounded(tracker.records[i].nbytes) for i in state["optimizer states"])
    if state.get("states_in_steady_phases"):  # the optimizer in backward made them before the forward
        state_bytes = 0
    phases = [_phase(tracker, name, state["saved"], state_bytes) for name in PHASES]
    trainable, total = count_parameters(model)
    peak = max(phases, key=lambda phase: phase.peak_cuda_bytes)
    workspace = cublas_workspace(cluster)
    sharding = _sharding_adjustment(spec, setting, cluster, seq_len)
    notes = []
    if setting.attention_impl == "flash_attention_2":
        notes.append("flash_attention_2 traced as SDPA's flash kernel (same saved tensors; flash-attn needs a GPU)")
    if sharding:
        notes.append(
            f"sharding {setting.sharding}: model states per rank by byte arithmetic ({sharding / 2**30:+.2f} GiB)"
        )
    del state
    return TraceReport(
        model=spec.key,
        setting_summary=setting.short(),
        seq_len=seq_len,
        micro_batch_size=setting.micro_batch_size,
        phases=phases,
        peak_bytes=max(phase.peak_bytes for phase in phases),
        peak_phase=peak.name,
        cuda_workspace_bytes=workspace,
        cuda_peak_allocated_bytes=peak.peak_cuda_bytes + workspace + sharding,
        sharding_adjustment_bytes=sharding,
        paged_optimizer_bytes=_paged_bytes(model, setting),
        trainable_params=trainable,
        total_params=total,
        elapsed_s=time.perf_counter() - started,
        notes=notes,
    )


def _phase(tracker: LiveBytesTracker, name: str, saved: set[int], optimizer_state_bytes: int) -> PhaseTrace:
    peak = tracker.peaks[name]
    categories = dict.fromkeys(CATEGORIES, 0)
    steady = optimizer_state_bytes if name in STEADY_STATE_PHASES else 0
    categories["optimizer states"] += steady
    for index in peak.live:
        record = tracker.records[index]
        label = _classify(index, record, saved)
        categories[label] = categories.get(label, 0) + cuda_rounded(record.nbytes)
    stats = tracker.ops[name]
    ops = {
        kind: OpClassStats(count=stats.count[kind], flops=stats.flops.get(kind, 0), bytes_moved=stats.bytes_moved[kind])
        for kind in sorted(stats.count)
    }
    return PhaseTrace(
        name=name,
        peak_bytes=peak.bytes + steady,
        peak_cuda_bytes=peak.cuda_bytes + steady,
        categories_bytes=categories,
        ops=ops,
    )


def _paged_bytes(model: torch.nn.Module, setting: TrainingSetting) -> int:
    from autotune.trace.step import MIN_8BIT_SIZE, PAGED_MIN_NUMEL

    if not setting.optimizer.startswith("paged"):
        return 0
    embeddings = {id(m.weight) for m in model.modules() if isinstance(m, torch.nn.Embedding)}  # 32-bit states
    return sum(
        2 * p.numel() * (4 if p.numel() < MIN_8BIT_SIZE or id(p) in embeddings else 1)
        for p in model.parameters()
        if p.requires_grad and p.numel() >= PAGED_MIN_NUMEL
    )


def _sharding_adjustment(spec: ModelSpec, setting: TrainingSetting, cluster: ClusterSpec | None, seq_len: int) -> int:
    """Per-rank model states of the sharded run minus those of the traced unsharded rank (bytes).

    The shard sizes, gathered units and DDP buckets are the byte arithmetic of
    ``autotune.costmodel.memory.model_state_bytes`` (one home for ZeRO / FSDP formulas); the trace itself
    runs one unsharded rank.
    """
    if cluster is None or setting.sharding == "none":
        return 0
    from autotune.costmodel.context import setting_context
    from autotune.costmodel.memory import model_state_bytes
    from autotune.costmodel.precision import dtype_bytes
    from autotune.schemas.workload import Workload

    dtypes = dtype_bytes(setting, cluster.gpu)
    single = cluster.model_copy(update={"num_gpus_per_node": 1, "num_nodes": 1})
    alone = setting.model_copy(update={"sharding": "none"})
    workload = Workload(seq_len=seq_len)
    unsharded = model_state_bytes(spec, alone, single, dtypes, setting_context(spec, alone, single, workload))
    sharded = model_state_bytes(spec, setting, cluster, dtypes, setting_context(spec, setting, cluster, workload))
    fields: Any = (
        "weights",
        "adapter_weights",
        "gathered_weights",
        "gradients",
        "unsharded_gradients",  # FSDP no_sync accumulation (grad_sync last-micro-step)
        "optimizer_states",
        "ddp_buckets",
    )
    return int(sum(getattr(sharded, f) - getattr(unsharded, f) for f in fields))
