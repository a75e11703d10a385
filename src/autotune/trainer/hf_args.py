"""The transformers ``TrainingArguments`` for a plan and the command line (one place for the mapping)."""

from __future__ import annotations

import os
from typing import Any

from transformers import TrainingArguments

from autotune.errors import ConfigError
from autotune.schemas.plan import PlanFile
from autotune.schemas.setting import trainer_precision_switches
from autotune.trainer.args import TrainerArgs
from autotune.trainer.chunked_loss import check_chunked_loss_supported
from autotune.trainer.model import PrecisionChoice
from autotune.trainer.optim import choose_optimizer

SAVE_TOTAL_LIMIT = 2
"""Checkpoints kept under OUT/checkpoints (the last one is what --resume needs)."""


def fsdp_arguments(plan: PlanFile) -> dict[str, Any]:
    """FSDP settings for TrainingArguments when the plan asks for FSDP and accelerate did not set them.

    FULL_SHARD with transformer-layer auto wrap on the plan's decoder layer class, CPU offload for
    fsdp-offload, and FSDP's own activation checkpointing in place of the model's (HF docs, "FSDP").
    Under ``accelerate launch --config_file`` (ACCELERATE_USE_FSDP set) accelerate's config wins.
    """
    setting = plan.setting
    if not setting.uses_fsdp or os.environ.get("ACCELERATE_USE_FSDP", "").lower() in (
        "1",
        "true",
    ):
        return {}
    options = "full_shard auto_wrap" + (" offload" if setting.offloads_to_cpu else "")
    return {
        "fsdp": options,
        "fsdp_config": {
            "transformer_layer_cls_to_wrap": [plan.model.decoder_layer_class],
            "activation_checkpointing": setting.grad_ckpt,
        },
    }


def build_training_arguments(plan: PlanFile, args: TrainerArgs, precision: PrecisionChoice) -> TrainingArguments:
    """TrainingArguments for this run. Must be built before the model is loaded (ZeRO-3 init needs it).

    Raises:
        ConfigError: a ZeRO plan without --deepspeed-config, a DeepSpeed JSON that does not exist, or
            loss_impl=chunked with a parameter-sharded run.
    """
    setting = plan.setting
    if setting.uses_deepspeed and args.deepspeed_config is None:
        raise ConfigError(
            f"the plan says sharding={setting.sharding}: pass --deepspeed-config (autotune launch writes "
            "OUT/deepspeed_config.json)"
        )
    if args.deepspeed_config is not None and not args.deepspeed_config.is_file():
        raise ConfigError(f"DeepSpeed config {args.deepspeed_config} not found")
    if args.deepspeed_config is not None and not setting.uses_deepspeed:
        raise ConfigError(f"--deepspeed-config given but the plan says sharding={setting.sharding}")
    if setting.loss_impl == "chunked":
        check_chunked_loss_supported(setting.sharding)
    fsdp = fsdp_arguments(plan)
    # Under DeepSpeed the switches select the engine's 16-bit mode and must equal the JSON's (launcher).
    bf16, fp16 = (
        trainer_precision_switches(setting.precision, deepspeed=True, cpu=args.cpu)
        if setting.uses_deepspeed
        else (precision.bf16, precision.fp16)
    )
    optimizer = choose_optimizer(setting.optimizer, plan.training, args.learning_rate, args.warmup_ratio)
    # grad_sync every-micro-step: reduce-scatter after each micro-step instead of FSDP's no_sync accumulation
    # (accelerate GradientAccumulationPlugin.sync_each_batch; the Trainer honours it for FSDP).
    accelerator: dict[str, Any] = {}
    if setting.uses_fsdp and setting.grad_sync == "every-micro-step":
        accelerator["accelerator_config"] = {"gradient_accumulation_kwargs": {"sync_each_batch": True}}
    return TrainingArguments(
        output_dir=str(args.checkpoints_dir),
        per_device_train_batch_size=setting.micro_batch_size,
        gradient_accumulation_steps=setting.grad_accum,
        max_steps=args.max_steps if args.max_steps is not None else -1,
        num_train_epochs=plan.workload.epochs,
        activation_checkpointing=setting.model_checkpointing,
        eval_strategy="steps" if args.eval_steps is not None else "no",
        eval_steps=args.eval_steps,
        per_device_eval_batch_size=setting.micro_batch_size,
        activation_checkpointing_kwargs={"use_reentrant": False} if setting.grad_ckpt else None,
        torch_compile=setting.compile,
        bf16=bf16,
        fp16=fp16,
        use_cpu=args.cpu,
        seed=args.seed,
        data_seed=args.seed,
        full_determinism=args.full_determinism,
        logging_steps=args.logging_steps,
        logging_nan_inf_filter=False,  # a NaN/inf step loss must reach the log: StopOnNonFiniteLossCallback stops
        save_strategy="steps",
        save_steps=args.save_steps,
        save_total_limit=SAVE_TOTAL_LIMIT,
        report_to=args.report_to,
        disable_tqdm=True,
        remove_unused_columns=False,
        dataloader_num_workers=0,
        include_num_input_tokens_seen="non_padding",
        ddp_find_unused_parameters=False,
        deepspeed=str(args.deepspeed_config) if args.deepspeed_config is not None else None,
        **{
            **optimizer.training_arguments(),
            # stepped inside the backward, no step sees every gradient: no clipping (trainer/in_backward.py)
            **({"max_grad_norm": 0.0} if setting.optimizer_in_backward else {}),
        },
        **fsdp,
        **accelerator,
    )
