"""Config files of the distributed back ends: accelerate's FSDP YAML and DeepSpeed's ZeRO JSON.

Key names were checked against the installed sources, not guessed:

- accelerate 1.15: ``accelerate/commands/config/config_args.py`` (``ClusterConfig`` top-level keys;
  unknown keys are rejected by ``from_yaml_file``), ``accelerate/commands/config/cluster.py`` (the
  ``fsdp_config`` keys the ``accelerate config`` wizard writes), ``accelerate/commands/launch.py``
  (each ``fsdp_config.fsdp_*`` key becomes the launch argument of the same name) and
  ``accelerate/utils/launch.py::prepare_multi_gpu_env`` (which exports them as ``FSDP_*`` variables
  read by ``FullyShardedDataParallelPlugin``, used by transformers' Trainer).
- DeepSpeed 0.19: ``deepspeed/runtime/zero/config.py`` (``DeepSpeedZeroConfig``: ``stage``,
  ``overlap_comm``, ``contiguous_gradients``, ``reduce_bucket_size``, ``offload_param``,
  ``offload_optimizer``, aliases ``stage3_*``) and ``deepspeed/runtime/zero/offload_config.py``
  (``device``, ``pin_memory``); ``transformers/integrations/deepspeed.py`` for the ``"auto"``
  values the Trainer fills in and the explicit values it checks against its own arguments.
"""

from __future__ import annotations

from typing import Any, Final

from autotune.errors import InvalidRequestError
from autotune.launcher.options import DEFAULT_MASTER_PORT
from autotune.schemas.plan import PlanFile
from autotune.schemas.setting import FSDP_SHARDINGS, ZERO_SHARDINGS, Precision, Sharding, trainer_precision_switches

_ZERO_STAGE: Final[dict[Sharding, int]] = {"zero2": 2, "zero3": 3, "zero3-offload": 3}

_ACCELERATE_MIXED_PRECISION: Final[dict[Precision, str]] = {
    "bf16": "bf16",
    "bf16-mixed": "bf16",
    "fp16-mixed": "fp16",
    "fp32": "no",
}
"""Plan precision -> accelerate ``mixed_precision`` (choices ``no``, ``fp16``, ``bf16``, ``fp8``)."""


def accelerate_config(
    plan: PlanFile,
    *,
    node_rank: int = 0,
    main_process_ip: str | None = None,
    main_process_port: int | None = None,
) -> dict[str, Any]:
    """The ``accelerate launch --config_file`` YAML (as a dict) for an FSDP / FSDP+offload plan.

    FSDP version 1 with FULL_SHARD, transformer-block auto wrap by ``plan.model.decoder_layer_class``,
    parameter (and gradient) CPU offload for ``fsdp-offload``, FSDP's own activation checkpointing
    when the plan checkpoints (the Trainer must then not enable its own: transformers raises if both
    are on), sharded state dicts (each rank saves its shard; no full gather on save),
    ``use_orig_params`` (LoRA mixes frozen and trainable parameters in one wrapped block) and
    CPU-RAM-efficient loading (rank 0 loads the weights, ``sync_module_states`` broadcasts them;
    accelerate refuses the first without the second). ``num_processes`` is the world size over all
    nodes; ``num_machines`` and ``machine_rank`` place this node, ``main_process_ip`` /
    ``main_process_port`` (multi-node: default port 29500) give node 0. Without a port on one node,
    accelerate's own default applies.

    Raises:
        InvalidRequestError: the plan does not use FSDP.
    """
    setting = plan.setting
    if setting.sharding not in FSDP_SHARDINGS:
        raise InvalidRequestError(f"accelerate FSDP config requested for sharding={setting.sharding}")
    cluster = plan.cluster
    config: dict[str, Any] = {
        "compute_environment": "LOCAL_MACHINE",
        "distributed_type": "FSDP",
        "mixed_precision": _ACCELERATE_MIXED_PRECISION[setting.precision],
        "num_processes": cluster.world_size,
        "num_machines": cluster.num_nodes,
        "machine_rank": node_rank,
    }
    if cluster.num_nodes > 1 and main_process_ip is not None:
        config["main_process_ip"] = main_process_ip
    if main_process_port is not None:
        config["main_process_port"] = main_process_port
    elif cluster.num_nodes > 1:
        config["main_process_port"] = DEFAULT_MASTER_PORT
    config.update(
        {
            "rdzv_backend": "static",
            "gpu_ids": "all",
            "use_cpu": False,
            "debug": False,
            "enable_cpu_affinity": False,
            "fsdp_config": {
                "fsdp_version": 1,
                "fsdp_sharding_strategy": "FULL_SHARD",
                "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
                "fsdp_transformer_layer_cls_to_wrap": plan.model.decoder_layer_class,
                "fsdp_backward_prefetch": "BACKWARD_PRE",
                "fsdp_offload_params": setting.offloads_to_cpu,
                "fsdp_activation_checkpointing": setting.grad_ckpt,
                "fsdp_state_dict_type": "SHARDED_STATE_DICT",
                "fsdp_use_orig_params": True,
                "fsdp_cpu_ram_efficient_loading": True,
                "fsdp_sync_module_states": True,
            },
        }
    )
    return config


def deepspeed_config(plan: PlanFile, cpu: bool = False) -> dict[str, Any]:
    """The DeepSpeed JSON (as a dict) passed to the Trainer's ``deepspeed=`` for a ZeRO plan.

    Batch sizes are the plan's explicit numbers, not ``"auto"``: transformers compares explicit
    values with its ``TrainingArguments`` (``per_device_train_batch_size``,
    ``gradient_accumulation_steps``, world size) and refuses a mismatch, so a trainer that ran
    anything but the plan stops before training. ``bf16.enabled`` / ``fp16.enabled`` are the switches the
    training core gives the Trainer for this precision on this device (``cpu``: fp16 runs as bf16), from the one
    rule both use (``schemas.setting.trainer_precision_switches``): transformers refuses a mismatch.
    ``gradient_clipping`` and the bucket sizes are ``"auto"`` (filled from ``max_grad_norm`` and the
    model's hidden size). ``zero3-offload`` offloads optimizer state and parameters to pinned CPU
    memory; DeepSpeed refuses a client (torch) optimizer with optimizer offload, so an ``optimizer``
    section makes DeepSpeed build its CPU AdamW (hyper-parameters ``"auto"`` from the Trainer).

    Raises:
        InvalidRequestError: the plan does not use ZeRO, or combines optimizer offload with an
            8-bit bitsandbytes optimizer (which cannot step on the CPU copy of the states).
    """
    setting = plan.setting
    if setting.sharding not in ZERO_SHARDINGS:
        raise InvalidRequestError(f"DeepSpeed config requested for sharding={setting.sharding}")
    offload = setting.offloads_to_cpu
    if offload and setting.optimizer != "adamw":
        raise InvalidRequestError(
            f"sharding=zero3-offload steps the optimizer on the CPU with DeepSpeed's CPU AdamW, "
            f"which replaces optimizer={setting.optimizer}: --set optimizer=adamw, or --set sharding=zero3"
        )
    stage = _ZERO_STAGE[setting.sharding]
    zero: dict[str, Any] = {
        "stage": stage,
        "overlap_comm": True,
        "contiguous_gradients": True,
        "reduce_bucket_size": "auto",
    }
    if stage == 3:
        zero["stage3_prefetch_bucket_size"] = "auto"
        zero["stage3_param_persistence_threshold"] = "auto"
        zero["stage3_gather_16bit_weights_on_model_save"] = True
    if offload:
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
        zero["offload_param"] = {"device": "cpu", "pin_memory": True}
    world_size = plan.cluster.world_size
    bf16, fp16 = trainer_precision_switches(setting.precision, deepspeed=True, cpu=cpu)
    config: dict[str, Any] = {
        "train_micro_batch_size_per_gpu": setting.micro_batch_size,
        "gradient_accumulation_steps": setting.grad_accum,
        "train_batch_size": setting.sequences_per_step(world_size),
        "gradient_clipping": "auto",
        "bf16": {"enabled": bf16},
        "fp16": {"enabled": fp16},
        "zero_optimization": zero,
    }
    if offload:
        config["optimizer"] = {
            "type": "AdamW",
            "params": {"lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto"},
        }
    return config
