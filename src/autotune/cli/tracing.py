"""Shared by ``trace``, ``estimate --trace`` and ``plan --verify``: the torch check, running the trace, rendering it.

The setting flags become a validated setting and workload in the session layer
(:func:`autotune.session.estimating.setting_inputs`).

Everything torch is imported inside the functions, so the CLI and planning stay torch-free. The ``--json``
fields of a trace are documented in ``autotune.cli.trace_cmd``.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING

from rich.table import Table

from autotune.cli.console import console
from autotune.errors import ConfigError
from autotune.session.estimating import SettingInputs

if TYPE_CHECKING:
    from autotune.schemas.trace import TraceReport

GIB = 2**30


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
