"""``autotune trace``: run the training core's real step on fake tensors and report live memory per phase.

Needs ``autotune[train]`` (torch, transformers, peft, bitsandbytes); everything torch is imported inside
the functions (autotune.cli.tracing), so the CLI and planning stay torch-free.

``--json`` prints :class:`autotune.schemas.trace.TraceReport`: ``phases`` (forward, backward, optimizer step),
each with ``peak_bytes`` (exact live storage bytes at the phase's peak), ``peak_cuda_bytes`` (each storage
rounded to 512 B), ``categories_bytes`` (weights, adapters, gradients, optimizer states, saved activations,
recomputed activations, logits + loss, temporaries; rounded bytes at the peak) and ``ops`` (op class → ``count``
of aten ops dispatched, ``flops`` by torch.utils.flop_counter's formulas, ``bytes_moved`` = bytes of tensor
inputs read + outputs written; classes matmul, attention, elementwise, reduction, copy); then ``peak_bytes``,
``peak_phase``, ``cuda_workspace_bytes``, ``sharding_adjustment_bytes``, ``cuda_peak_allocated_bytes`` (the
predicted ``torch.cuda.max_memory_allocated``), ``paged_optimizer_bytes`` (unified memory, not counted
by the allocator), parameter counts, ``elapsed_s`` and notes.
"""

from __future__ import annotations

from typing import Annotated

import typer

from autotune.cli import options as opt
from autotune.cli.console import console
from autotune.cli.render import print_json
from autotune.cli.tracing import AttentionOpt, render_trace, require_torch, run_trace, setting_inputs


def trace_command(
    model: opt.ModelArg,
    gpu: Annotated[str, typer.Option("--gpu", help="GPU (cuBLAS workspace, sharding, default precision).")] = "h100",
    num_gpus: opt.NumGpusOpt = 1,
    num_nodes: opt.NumNodesOpt = 1,
    host_memory_gib: opt.HostMemoryOpt = None,
    method: Annotated[str, typer.Option("--method", help="full, lora or qlora.")] = "lora",
    seq_len: opt.SeqLenOpt = 2048,
    micro_batch_size: Annotated[int, typer.Option("--micro-batch-size", help="Sequences per micro batch.")] = 1,
    grad_accum: Annotated[int, typer.Option("--grad-accum", help="Gradient accumulation steps.")] = 1,
    grad_ckpt: Annotated[bool, typer.Option("--grad-ckpt/--no-grad-ckpt", help="Activation checkpointing.")] = True,
    optimizer: Annotated[str, typer.Option("--optimizer", help="adamw, adamw-8bit, paged-adamw-8bit.")] = "adamw",
    precision: opt.PrecisionOpt = None,
    sharding: opt.ShardingOpt = None,
    lora_rank: Annotated[int, typer.Option("--lora-rank", help="LoRA rank.")] = 16,
    lora_targets: Annotated[str, typer.Option("--lora-targets", help="all-linear or q_proj,v_proj,...")] = "all-linear",
    compile_: Annotated[bool, typer.Option("--compile/--no-compile", help="torch.compile.")] = False,
    loss_impl: Annotated[str, typer.Option("--loss-impl", help="fp32-upcast, native or chunked.")] = "fp32-upcast",
    attention_impl: AttentionOpt = "sdpa",
    json_: opt.JsonOpt = False,
) -> None:
    """Trace one training step on fake tensors: live memory per phase, ops, FLOPs (needs torch)."""
    require_torch()
    inputs = setting_inputs(
        model, gpu, num_gpus, num_nodes, host_memory_gib, method, seq_len, micro_batch_size, grad_accum, grad_ckpt,
        optimizer, precision, sharding, lora_rank, lora_targets, compile_, loss_impl, attention_impl, None, None, 1.0,
    )  # fmt: skip
    report = run_trace(inputs)
    if json_:
        print_json({**report.model_dump(mode="json"), "setting": inputs.setting.model_dump(mode="json")})
        return
    for note in inputs.notes:
        console().print(f"[yellow]note:[/] {note}")
    render_trace(report)
