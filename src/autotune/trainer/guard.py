"""Runtime guard: after set-up, check that what runs is what the plan says, else stop.

Without GPUs, accelerate and Trainer quietly turn an FSDP request into plain DDP (or a single
process); a launcher mistake can start the wrong number of processes; a quantization config can be
ignored. Training on in such a state would produce measurements that look valid but belong to another
setting, so every mismatch raises :class:`RuntimeGuardError` with what was planned and what runs.
"""

from __future__ import annotations

from typing import Any

import torch

from autotune.errors import RuntimeGuardError
from autotune.schemas.plan import PlanFile
from autotune.trainer.model import ATTENTION_IMPLEMENTATIONS


def check_runtime(trainer: Any, plan: PlanFile) -> None:
    """Compare the prepared Trainer (after ``accelerator.prepare``) with the plan.

    Checks: world size = planned GPUs; global batch = micro batch × accumulation × world size;
    FSDP really wraps the model (and offloads parameters for fsdp-offload); DeepSpeed runs the planned
    ZeRO stage (and offloads for zero3-offload); DDP wraps the model when planned with > 1 rank; the model is
    compiled exactly when planned; activation checkpointing runs exactly when planned; the attention implementation
    is the planned one; QLoRA has 4-bit layers; LoRA / QLoRA have adapters and train nothing else; full trains
    every weight.

    Raises:
        RuntimeGuardError: the first mismatch, naming the plan field, the planned and the actual value.
    """
    setting = plan.setting
    world_size = int(trainer.args.world_size)
    planned_world = plan.cluster.world_size
    if world_size != planned_world:
        raise RuntimeGuardError(
            f"the plan is for {planned_world} GPU(s) ({plan.cluster.num_nodes} node(s) × "
            f"{plan.cluster.num_gpus_per_node}) but {world_size} process(es) run; start it with "
            "'autotune launch' or match --nproc_per_node"
        )
    global_batch = setting.sequences_per_step(world_size)
    if global_batch != plan.workload.global_batch_size:
        raise RuntimeGuardError(
            f"micro_batch_size {setting.micro_batch_size} × grad_accum {setting.grad_accum} × {world_size} ranks "
            f"= {global_batch} sequences per step, but the plan's global_batch_size is "
            f"{plan.workload.global_batch_size}"
        )
    _check_sharding(trainer, plan)
    _check_compile(trainer, plan)
    _check_checkpointing(trainer, plan)
    _check_attention(trainer.model, plan)
    _check_method(trainer.model, plan)


def _check_compile(trainer: Any, plan: PlanFile) -> None:
    """The model the Trainer runs is ``torch.compile``d exactly when the plan says compile.

    A peft model too: the whole ``PeftModel`` is compiled by accelerate's ``prepare_model``, adapters included. Under
    DeepSpeed the engine wraps the model and compiles it itself; not checked there.
    """
    if plan.setting.uses_deepspeed:
        return
    compiled = _is_compiled(trainer.model_wrapped)
    if compiled != plan.setting.compile:
        raise RuntimeGuardError(
            f"the plan says compile={plan.setting.compile} but the model that trains is "
            f"{'' if compiled else 'not '}compiled"
        )


def checkpointing_runs(trainer: Any) -> bool:
    """Whether activation checkpointing is on in the model that trains, by either of the ways the core switches it on.

    The model's own (transformers' ``activation_checkpointing_enable``, which the Trainer's
    ``activation_checkpointing`` argument and peft's ``prepare_model_for_kbit_training`` call): a module whose
    ``gradient_checkpointing`` attribute is True (``PreTrainedModel.is_activation_checkpointing``'s test, 5.23).
    FSDP's (accelerate's ``fsdp_activation_checkpointing``): torch's ``apply_activation_checkpointing`` wraps each
    layer in a ``CheckpointWrapper``.
    """
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointWrapper

    models = [m for m in (trainer.model, trainer.model_wrapped) if isinstance(m, torch.nn.Module)]
    return any(
        getattr(module, "gradient_checkpointing", False) is True or isinstance(module, CheckpointWrapper)
        for model in models
        for module in model.modules()
    )


def _check_checkpointing(trainer: Any, plan: PlanFile) -> None:
    """Activation checkpointing runs exactly when the plan says ``grad_ckpt`` (memory and time were priced so)."""
    runs = checkpointing_runs(trainer)
    if runs != plan.setting.grad_ckpt:
        raise RuntimeGuardError(
            f"the plan says grad_ckpt={plan.setting.grad_ckpt} but activation checkpointing is "
            f"{'on' if runs else 'off'} in the model that trains"
        )


def _check_attention(model: Any, plan: PlanFile) -> None:
    """The model computes attention with the planned implementation (``config._attn_implementation``)."""
    planned = ATTENTION_IMPLEMENTATIONS[plan.setting.attention_impl]
    actual = getattr(getattr(model, "config", None), "_attn_implementation", None)
    if actual != planned:
        raise RuntimeGuardError(
            f"the plan says attention_impl={plan.setting.attention_impl} but the model runs attention with {actual}"
        )


def _distributed_type(trainer: Any) -> str:
    return str(getattr(trainer.accelerator.distributed_type, "value", trainer.accelerator.distributed_type))


def _check_sharding(trainer: Any, plan: PlanFile) -> None:
    sharding = plan.setting.sharding
    actual = _distributed_type(trainer)
    if plan.setting.uses_fsdp:
        plugin = getattr(trainer.accelerator.state, "fsdp_plugin", None)
        wrapped = _has_fsdp_modules(trainer.model_wrapped) or _has_fsdp_modules(trainer.model)
        if actual != "FSDP" or plugin is None or not wrapped:
            raise RuntimeGuardError(
                f"the plan says sharding={sharding} but FSDP is not active (distributed type {actual}, "
                f"{'some' if wrapped else 'no'} FSDP-wrapped modules): accelerate/Trainer fell back to "
                f"{'DDP' if actual.startswith('MULTI') else actual}, as they do without GPUs; run FSDP plans "
                "on GPUs or plan with sharding ddp, zero2 or zero3"
            )
        offloaded = bool(getattr(getattr(plugin, "cpu_offload", None), "offload_params", False))
        if plan.setting.offloads_to_cpu != offloaded:
            raise RuntimeGuardError(
                f"the plan says sharding={sharding} but FSDP CPU offload is {'on' if offloaded else 'off'}"
            )
        return
    if plan.setting.uses_deepspeed:
        planned_stage = 2 if sharding == "zero2" else 3
        engine = getattr(trainer, "deepspeed", None) or trainer.model_wrapped
        stage_of = getattr(engine, "zero_optimization_stage", None)
        if actual != "DEEPSPEED" or stage_of is None:
            raise RuntimeGuardError(
                f"the plan says sharding={sharding} but DeepSpeed is not running (distributed type {actual}); "
                "pass --deepspeed-config with the JSON 'autotune launch' writes"
            )
        stage = int(stage_of())
        if stage != planned_stage:
            raise RuntimeGuardError(
                f"the plan says sharding={sharding} (ZeRO stage {planned_stage}) but DeepSpeed runs ZeRO "
                f"stage {stage}; use the DeepSpeed JSON written for this plan"
            )
        offloaded = bool(engine.zero_offload_optimizer() or engine.zero_offload_param())
        if plan.setting.offloads_to_cpu != offloaded:
            raise RuntimeGuardError(
                f"the plan says sharding={sharding} but DeepSpeed CPU offload is {'on' if offloaded else 'off'}"
            )
        return
    if actual in ("FSDP", "DEEPSPEED"):
        raise RuntimeGuardError(f"the plan says sharding={sharding} but the run uses {actual}")
    # accelerate compiles last: a compiled DDP run's model_wrapped is OptimizedModule(DistributedDataParallel(...))
    runs = trainer.model_wrapped._orig_mod if _is_compiled(trainer.model_wrapped) else trainer.model_wrapped
    wrapped_in_ddp = isinstance(runs, torch.nn.parallel.DistributedDataParallel)
    if sharding == "ddp" and int(trainer.args.world_size) > 1 and not wrapped_in_ddp:
        raise RuntimeGuardError(
            f"the plan says sharding=ddp but the model is not wrapped in DistributedDataParallel ({actual})"
        )


def _is_compiled(model: Any) -> bool:
    """``torch.compile(model)``'s wrapper (accelerate's ``is_compiled_module`` test)."""
    return isinstance(model, torch._dynamo.eval_frame.OptimizedModule)


def _has_fsdp_modules(model: Any) -> bool:
    if not isinstance(model, torch.nn.Module):
        return False
    fsdp_types: list[type] = []
    try:
        from torch.distributed.fsdp import FullyShardedDataParallel

        fsdp_types.append(FullyShardedDataParallel)
    except ImportError:  # pragma: no cover - torch without distributed
        pass
    try:
        from torch.distributed.fsdp import FSDPModule

        fsdp_types.append(FSDPModule)
    except ImportError:  # pragma: no cover - torch < 2.6
        pass
    return any(isinstance(module, tuple(fsdp_types)) for module in model.modules())


def _check_method(model: torch.nn.Module, plan: PlanFile) -> None:
    setting = plan.setting
    if setting.method == "qlora":
        import bitsandbytes as bnb

        quantized = sum(1 for module in model.modules() if isinstance(module, bnb.nn.Linear4bit))
        if quantized == 0:
            raise RuntimeGuardError("the plan says method=qlora but the model has no 4-bit (bitsandbytes) layers")
    trainable = [name for name, param in model.named_parameters() if param.requires_grad]
    if setting.uses_adapters:
        from peft.tuners.lora import LoraLayer

        adapters = sum(1 for module in model.modules() if isinstance(module, LoraLayer))
        if adapters == 0 or not trainable:
            raise RuntimeGuardError(
                f"the plan says method={setting.method} but the model has no trainable LoRA adapters"
            )
        others = [name for name in trainable if "lora_" not in name]
        if others:
            raise RuntimeGuardError(
                f"the plan says method={setting.method} but {len(others)} non-adapter tensors train (e.g. {others[0]})"
            )
        return
    frozen = [name for name, param in model.named_parameters() if not param.requires_grad]
    if frozen:
        raise RuntimeGuardError(f"the plan says method=full but {len(frozen)} tensors are frozen (e.g. {frozen[0]})")
