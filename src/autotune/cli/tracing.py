"""Shared by ``trace``, ``estimate --trace`` and ``plan --verify``: setting inputs, the torch check, the trace.

The setting flags are turned into a validated setting and workload (``setting_inputs``); then the torch check, running
the trace and rendering it.

Everything torch is imported inside the functions, so the CLI and planning stay torch-free. The ``--json``
fields of a trace are documented in ``autotune.cli.trace_cmd``.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.table import Table

from autotune.cli.console import console
from autotune.cli.resolve import resolve_cluster, resolve_model, validated
from autotune.cli.setting_options import SettingOptions
from autotune.errors import ConfigError, InvalidRequestError
from autotune.planner.space import grad_sync_error, offload_accumulation_error
from autotune.schemas.hardware import ClusterSpec
from autotune.schemas.model import ModelSpec
from autotune.schemas.setting import TrainingSetting, Workload, default_precision, default_sharding, fp8_error

if TYPE_CHECKING:
    from autotune.schemas.trace import TraceReport

GIB = 2**30


@dataclass(frozen=True)
class SettingInputs:
    """A resolved model, cluster, setting and workload from the command-line flags."""

    spec: ModelSpec
    source: str
    cluster: ClusterSpec
    notes: list[str]
    setting: TrainingSetting
    workload: Workload


def require_torch() -> None:
    """Raise a one-line error when the training stack is not installed.

    Raises:
        ConfigError: torch or transformers cannot be imported.
    """
    missing = [name for name in ("torch", "transformers", "peft") if importlib.util.find_spec(name) is None]
    if missing:
        raise ConfigError(
            f"tracing needs {', '.join(missing)}: pip install 'autotune[train]' (torch 2.13 first, see README)"
        )


def setting_inputs(
    model: str,
    gpu: str,
    num_gpus: int,
    num_nodes: int,
    host_memory_gib: float | None,
    options: SettingOptions,
    *,
    seq_len: int,
    num_samples: int | None = None,
    dataset_tokens: int | None = None,
    epochs: float = 1.0,
) -> SettingInputs:
    """The one setting that ``estimate`` and ``trace`` evaluate: the options given, the setting's defaults for the rest.

    Sharding and precision not given take the cluster's defaults (:func:`default_sharding`,
    :func:`default_precision`); every other field its :class:`TrainingSetting` default. The global batch is
    micro batch × accumulation × GPUs.

    Raises:
        AutotuneError: unknown model or GPU, or an invalid setting (one line each).
    """
    spec, source = resolve_model(model)
    cluster, notes = resolve_cluster(gpu, num_gpus, num_nodes, host_memory_gib)
    given = options.overrides().forced()
    defaults = {
        "sharding": default_sharding(cluster.world_size),
        "precision": default_precision(cluster.gpu.supports_bf16),
    }
    setting = validated(TrainingSetting, **{**defaults, **given})
    card = cluster.gpu
    problem = (
        grad_sync_error(setting.grad_sync, setting.sharding, cluster.world_size)
        or offload_accumulation_error(setting.sharding, setting.grad_accum, setting.grad_sync, cluster.world_size)
        or fp8_error(setting.fp8, setting.method, card.name, card.vendor, card.generation)
    )
    if problem:
        raise InvalidRequestError(problem)
    workload = validated(
        Workload,
        seq_len=seq_len,
        global_batch_size=setting.sequences_per_step(cluster.world_size),
        num_samples=num_samples,
        dataset_tokens=dataset_tokens,
        epochs=epochs,
    )
    return SettingInputs(spec, source, cluster, notes, setting, workload)


def run_trace(inputs: SettingInputs) -> TraceReport:
    """Trace the setting (imports torch). Raises ConfigError when the stack is missing or cannot build it."""
    require_torch()
    from autotune.quiet import quiet_third_party
    from autotune.trace import trace_training_step

    quiet_third_party()
    return trace_training_step(
        inputs.spec, inputs.setting, inputs.workload.seq_len, inputs.cluster, source=_local_source(inputs.source)
    )


def _local_source(source: str) -> str | None:
    from pathlib import Path

    return source if Path(source).exists() else None


def render_trace(report: TraceReport) -> None:
    """Print the per-phase peaks by category and the op statistics."""
    table = Table(title=f"traced step: {report.model}, {report.setting_summary}, seq_len {report.seq_len}")
    table.add_column("GiB at peak")
    for phase in report.phases:
        table.add_column(phase.name, justify="right")
    names = [name for name in report.phases[0].categories_bytes if any(p.categories_bytes[name] for p in report.phases)]
    for name in names:
        table.add_row(name, *(f"{p.categories_bytes[name] / GIB:.3f}" for p in report.phases))
    table.add_row("[bold]peak (512 B-rounded)", *(f"[bold]{p.peak_cuda_bytes / GIB:.3f}" for p in report.phases))
    console().print(table)
    ops = Table(title="ops dispatched per phase: count / TFLOP / GB moved")
    ops.add_column("op class")
    for phase in report.phases:
        ops.add_column(phase.name, justify="right")
    classes = sorted({kind for p in report.phases for kind in p.ops})
    for kind in classes:
        cells = []
        for p in report.phases:
            stats = p.ops.get(kind)
            cells.append(f"{stats.count} / {stats.flops / 1e12:.2f} / {stats.bytes_moved / 1e9:.1f}" if stats else "-")
        ops.add_row(kind, *cells)
    console().print(ops)
    console().print(
        f"peak {report.peak_phase}: {report.peak_bytes / GIB:.3f} GiB live tensors; predicted CUDA max allocated "
        f"{report.cuda_peak_allocated_bytes / GIB:.3f} GiB (+{report.cuda_workspace_bytes / 2**20:.0f} MiB cuBLAS "
        f"workspaces{_sharding(report)}); traced in {report.elapsed_s:.1f} s"
    )
    if report.paged_optimizer_bytes:
        console().print(
            f"paged optimizer states: {report.paged_optimizer_bytes / GIB:.3f} GiB in unified memory (not counted)"
        )
    for note in report.notes:
        console().print(f"[yellow]note:[/] {note}")


def _sharding(report: TraceReport) -> str:
    if not report.sharding_adjustment_bytes:
        return ""
    return f", {report.sharding_adjustment_bytes / GIB:+.2f} GiB sharded model states"


def render_predicted_vs_traced(rows: list[tuple[str, float, TraceReport]]) -> None:
    """Side-by-side analytic vs traced peak allocated memory (GiB) for settings."""
    table = Table(title="predicted vs traced peak allocated memory per GPU")
    for column in ("setting", "predicted GiB", "traced GiB", "difference"):
        table.add_column(column, justify="left" if column == "setting" else "right")
    for label, predicted_gib, report in rows:
        traced_gib = report.cuda_peak_allocated_bytes / GIB
        table.add_row(
            label, f"{predicted_gib:.2f}", f"{traced_gib:.2f}", f"{(predicted_gib - traced_gib) / traced_gib:+.1%}"
        )
    console().print(table)
