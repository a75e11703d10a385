"""Option types shared by ``plan``, ``estimate``, ``trace`` and ``launch`` (help texts come from the schemas)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from autotune.schemas.setting import DESCRIPTIONS

# typer needs Optional[...] (not X | None) inside Annotated on Python 3.10.
ModelArg = Annotated[
    str,
    typer.Argument(
        help="Catalog model name (autotune models), a Hugging Face config.json or model directory, or a .gguf file."
    ),
]
GpuOpt = Annotated[str, typer.Option("--gpu", help="GPU name or alias (autotune gpus), e.g. 4090, a100, h100.")]
NumGpusOpt = Annotated[int, typer.Option("--num-gpus", help="GPUs per node.")]
NumNodesOpt = Annotated[int, typer.Option("--num-nodes", help="Nodes.")]
HostMemoryOpt = Annotated[
    float | None,
    typer.Option(
        "--host-memory-gib",
        help="Host RAM per node for CPU offload, GiB (default: assumed 2× the node's GPU memory).",
    ),
]
SeqLenOpt = Annotated[int, typer.Option("--seq-len", help=DESCRIPTIONS["seq_len"])]
GlobalBatchOpt = Annotated[int, typer.Option("--global-batch-size", help=DESCRIPTIONS["global_batch_size"])]
NumSamplesOpt = Annotated[int | None, typer.Option("--num-samples", help=DESCRIPTIONS["num_samples"])]
DatasetTokensOpt = Annotated[int | None, typer.Option("--dataset-tokens", help=DESCRIPTIONS["dataset_tokens"])]
EpochsOpt = Annotated[float, typer.Option("--epochs", help=DESCRIPTIONS["epochs"])]
ObjectiveOpt = Annotated[
    str, typer.Option("--objective", help="quality (full > LoRA > QLoRA, then fastest), speed, or memory.")
]
MethodOpt = Annotated[str | None, typer.Option("--method", help=DESCRIPTIONS["method"])]
MicroBatchOpt = Annotated[int | None, typer.Option("--micro-batch-size", help=DESCRIPTIONS["micro_batch_size"])]
GradAccumOpt = Annotated[int | None, typer.Option("--grad-accum", help=DESCRIPTIONS["grad_accum"])]
GradCkptOpt = Annotated[bool | None, typer.Option("--grad-ckpt/--no-grad-ckpt", help=DESCRIPTIONS["grad_ckpt"])]
CompileOpt = Annotated[bool | None, typer.Option("--compile/--no-compile", help=DESCRIPTIONS["compile"])]
ShardingOpt = Annotated[str | None, typer.Option("--sharding", help=DESCRIPTIONS["sharding"])]
OptimizerOpt = Annotated[str | None, typer.Option("--optimizer", help=DESCRIPTIONS["optimizer"])]
PrecisionOpt = Annotated[str | None, typer.Option("--precision", help=DESCRIPTIONS["precision"])]
LoraRankOpt = Annotated[int | None, typer.Option("--lora-rank", help=DESCRIPTIONS["lora_rank"])]
LoraAlphaOpt = Annotated[float | None, typer.Option("--lora-alpha", help=DESCRIPTIONS["lora_alpha"])]
LoraDropoutOpt = Annotated[float | None, typer.Option("--lora-dropout", help=DESCRIPTIONS["lora_dropout"])]
AdapterDtypeOpt = Annotated[str | None, typer.Option("--adapter-dtype", help=DESCRIPTIONS["adapter_dtype"])]
KernelsOpt = Annotated[str | None, typer.Option("--kernels", help=DESCRIPTIONS["kernels"])]
LoraTargetsOpt = Annotated[str | None, typer.Option("--lora-targets", help=DESCRIPTIONS["lora_targets"])]
LossImplOpt = Annotated[str | None, typer.Option("--loss-impl", help=DESCRIPTIONS["loss_impl"])]
GradSyncOpt = Annotated[str | None, typer.Option("--grad-sync", help=DESCRIPTIONS["grad_sync"])]
# One stated setting (``estimate`` and ``trace``): every field has a value, so the types are not optional.
StatedMethodOpt = Annotated[str, typer.Option("--method", help="full, lora or qlora.")]
StatedMicroBatchOpt = Annotated[int, typer.Option("--micro-batch-size", help="Sequences per micro batch.")]
StatedGradAccumOpt = Annotated[int, typer.Option("--grad-accum", help="Gradient accumulation steps.")]
StatedGradCkptOpt = Annotated[bool, typer.Option("--grad-ckpt/--no-grad-ckpt", help="Activation checkpointing.")]
StatedOptimizerOpt = Annotated[str, typer.Option("--optimizer", help="adamw, adamw-8bit, paged-adamw-8bit.")]
StatedLoraRankOpt = Annotated[int, typer.Option("--lora-rank", help="LoRA rank.")]
StatedLoraTargetsOpt = Annotated[str, typer.Option("--lora-targets", help="all-linear or q_proj,v_proj,...")]
StatedCompileOpt = Annotated[bool, typer.Option("--compile/--no-compile", help="torch.compile.")]
StatedLossImplOpt = Annotated[str, typer.Option("--loss-impl", help="fp32-upcast, native or chunked.")]
StatedGradSyncOpt = Annotated[
    str, typer.Option("--grad-sync", help="FSDP under accumulation: last-micro-step (no_sync) or every-micro-step.")
]
CalibrationOpt = Annotated[
    Path | None,
    typer.Option("--calibration", help="Calibration YAML from 'autotune calibrate' (default: the shipped fit)."),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON instead of tables.")]
