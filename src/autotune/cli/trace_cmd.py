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
from autotune.cli.setting_options import takes_setting_options
from autotune.cli.tracing import render_trace, require_torch, run_trace
from autotune.errors import InvalidRequestError
from autotune.schemas.setting import DEFAULT_SEQ_LEN, attention_run_error
from autotune.session.estimating import setting_inputs
from autotune.session.option_groups import DEFAULT_NODES, NodeOptions
from autotune.session.setting_options import NOT_GIVEN, SettingOptions


@takes_setting_options(stated=True)
def trace_command(
    model: opt.ModelArg,
    gpu: Annotated[str, typer.Option("--gpu", help="GPU (cuBLAS workspace, sharding, default precision).")] = "h100",
    num_gpus: opt.NumGpusOpt = 1,
    nodes: NodeOptions = DEFAULT_NODES,
    seq_len: opt.SeqLenOpt = DEFAULT_SEQ_LEN,
    setting: SettingOptions = NOT_GIVEN,
    json_: opt.JsonOpt = False,
) -> None:
    """Trace one training step on fake tensors: live memory per phase, ops, FLOPs (needs torch)."""
    require_torch()
    inputs = setting_inputs(
        model, gpu, num_gpus, nodes.num_nodes, nodes.host_memory_gib, setting, seq_len=seq_len,
        interconnect=nodes.interconnect,
    )  # fmt: skip
    attention_error = attention_run_error(inputs.setting.attention_impl)
    if attention_error:  # the trace builds today's transformers model
        raise InvalidRequestError(attention_error)
    report = run_trace(inputs)
    if json_:
        print_json({**report.model_dump(mode="json"), "setting": inputs.setting.model_dump(mode="json")})
        return
    for note in inputs.notes:
        console().print(f"[yellow]note:[/] {note}")
    render_trace(report)
