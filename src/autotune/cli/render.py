"""Rich rendering of estimates and plans (tables), and JSON output. No computation happens here."""

from __future__ import annotations

import json
import math
from pathlib import PurePath
from typing import TYPE_CHECKING, Any

from autotune.cli.console import console, print_plain
from autotune.schemas.dataset_stats import DatasetStats
from autotune.schemas.estimate import Estimate
from autotune.schemas.plan import PlanFile
from autotune.schemas.setting import TrainingSetting
from autotune.units import human_duration

if TYPE_CHECKING:  # rich's tables are imported when a table is drawn (not for --json)
    from rich.table import Table


def print_json(data: Any) -> None:
    """Print JSON to stdout (no rich markup); a NaN / infinity becomes ``null`` (never invalid JSON)."""
    print_plain(json.dumps(_finite(data), indent=2, default=str, allow_nan=False))


def _finite(data: Any) -> Any:
    """``data`` with every non-finite float replaced by None (JSON has no NaN or Infinity)."""
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {key: _finite(value) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return [_finite(value) for value in data]
    return data


def human_seconds(seconds: float | None) -> str:
    """A measured or predicted time as the docs write it: '0.453 s', '84.1 s', '38.0 min', '1.38 h'."""
    if seconds is None:
        return "—"
    if seconds < 120:
        return f"{seconds:.3g} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.2f} h"


def setting_table(setting: TrainingSetting, title: str = "Setting") -> Table:
    """The chosen values, one row each."""
    from rich.table import Table

    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column("option", style="cyan")
    table.add_column("value")
    rows: list[tuple[str, str]] = [("method", setting.method)]
    if setting.uses_adapters:
        rows.append(
            (
                "LoRA",
                f"r {setting.lora_rank}, alpha {setting.lora_alpha:g}, targets {','.join(setting.lora_targets)}, "
                f"dropout {setting.lora_dropout:g}, adapters {setting.adapter_dtype}",
            )
        )
    rows += [
        ("micro batch size", str(setting.micro_batch_size)),
        ("gradient accumulation steps", str(setting.grad_accum)),
        ("activation checkpointing", "on" if setting.grad_ckpt else "off"),
        ("torch.compile", "on" if setting.compile else "off"),
        ("sharding", setting.sharding),
    ]
    if setting.uses_fsdp:
        rows.append(("FSDP gradient sync", setting.grad_sync))
    rows += [
        ("optimizer", setting.optimizer + (" (stepped inside the backward)" if setting.optimizer_in_backward else "")),
        (
            "precision",
            setting.precision + (" (stochastic rounding: torchao)" if setting.bf16_stochastic_rounding else ""),
        ),
        ("loss", setting.loss_impl),
    ]
    if setting.kernels != "none":
        rows.append(("fused kernels", setting.kernels))
    if setting.activation_offloading:
        rows.append(("activations", "offloaded to host memory (each layer's saved tensors, over PCIe)"))
    if setting.fp8:
        rows.append(("linear layers", "fp8 (torchao float8; priced at the bf16 rate: not measured by the core yet)"))
    for name, value in rows:
        table.add_row(name, value)
    return table


def memory_table(estimate: Estimate) -> Table:
    """Memory breakdown at the peak, per GPU, with totals and the GPU's capacity."""
    from rich.table import Table

    table = Table(title=f"Peak memory per GPU (at {estimate.peak_phase})", title_justify="left")
    table.add_column("part", style="cyan")
    table.add_column("GiB", justify="right")
    for name, value in sorted(estimate.memory_breakdown_gib.items(), key=lambda item: -item[1]):
        table.add_row(name, f"{value:.2f}")
    table.add_row(
        "[bold]peak allocated[/]",
        f"[bold]{estimate.peak_memory_gib:.2f}[/] ± {estimate.memory_uncertainty_gib:.2f}",
    )
    reserved = f"{estimate.peak_reserved_gib:.2f}"
    if estimate.reserved_at_capacity:
        reserved = f"card full: {reserved}"
    table.add_row("peak reserved (allocator)", reserved)
    table.add_row("CUDA context", f"{estimate.cuda_context_gib:.2f}")
    table.add_row("headroom kept", f"{estimate.memory_headroom_gib:.2f}")
    verdict = "[green]fits[/]" if estimate.fits else "[red]does not fit[/]"
    table.add_row("GPU memory", f"{estimate.gpu_memory_gib:.0f}  {verdict}")
    if estimate.host_memory_gib:
        table.add_row("host RAM per node (offload)", f"{estimate.host_memory_gib:.1f}")
    return table


def time_table(estimate: Estimate) -> Table:
    """Times and throughput."""
    from rich.table import Table

    table = Table(title="Time", show_header=False, title_justify="left")
    table.add_column("quantity", style="cyan")
    table.add_column("value", justify="right")
    band = f" ± {estimate.time_uncertainty_fraction * 100:.0f}%"
    table.add_row("micro-step", f"{estimate.micro_step_time_s:.3f} s{band}")
    table.add_row("optimizer step (incl. accumulation)", f"{estimate.step_time_s:.2f} s")
    table.add_row("tokens/s (all GPUs)", f"{estimate.tokens_per_s:,.0f}")
    table.add_row("MFU", mfu_text(estimate))
    if estimate.evidence_note:  # under the table: what backs the times and the band
        table.caption, table.caption_justify = f"evidence: {estimate.evidence_note}", "left"
    step = estimate.step_time_s
    # the time terms (costmodel.step_time.TimeTerms): every non-zero one; they add up to the optimizer step
    for name, seconds in sorted(estimate.time_breakdown_s.items(), key=lambda item: -item[1]):
        if seconds > 0:
            table.add_row(f"  of the step: {name}", f"{seconds:.3f} s ({seconds / step:.1%})")
    if estimate.compile_time_s:
        table.add_row("compile (once)", human_duration(estimate.compile_time_s))
    if estimate.eval_time_s is not None:
        evals = f"{estimate.num_evals} eval{'s' if estimate.num_evals != 1 else ''}"
        table.add_row("eval loss", f"{human_duration(estimate.eval_time_s)} ({evals})")
    if estimate.total_time_s is not None:
        evals = " + evals" if estimate.eval_time_s is not None else ""
        table.add_row(
            "whole run", f"{human_duration(estimate.total_time_s)} ({estimate.num_optimizer_steps} steps{evals})"
        )
    return table


def mfu_text(estimate: Estimate) -> str:
    """'41.2%', with the public cap it is held at (or under) unless our core ran the card."""
    text = f"{estimate.mfu * 100:.1f}%"
    if estimate.mfu_uncapped is not None:
        return f"{text} (held at the public cap; the model alone says {estimate.mfu_uncapped * 100:.1f}%)"
    if estimate.mfu_cap is not None:
        return f"{text} (public cap {estimate.mfu_cap * 100:.1f}%)"
    return text


def dataset_table(stats: DatasetStats) -> Table:
    """The dataset's length distribution at the plan's seq_len and the blocks packing makes of it."""
    from rich.table import Table

    table = Table(
        title=f"Dataset ({stats.format}, tokenizer {PurePath(stats.tokenizer).name or stats.tokenizer})",
        show_header=False,
        title_justify="left",
    )
    table.add_column(style="bold")
    table.add_column(justify="right")
    read = f"{stats.rows_read:,}" + (f" of {stats.rows_total:,}" if stats.rows_read < stats.rows_total else "")
    table.add_row("rows read", read)
    table.add_row("examples kept", f"{stats.examples_kept:,}")
    table.add_row("tokens (learned)", f"{stats.total_tokens:,} ({stats.learned_tokens:,})")
    table.add_row("length p50 / p90 / p99 / max", f"{stats.p50_tokens:,} / {stats.p90_tokens:,} / "
                  f"{stats.p99_tokens:,} / {stats.max_tokens:,}")  # fmt: skip
    table.add_row(f"truncated at seq_len {stats.seq_len}", f"{stats.truncated:,} ({stats.tokens_lost:,} tokens)")
    table.add_row("packed blocks (efficiency)", f"{stats.blocks_total:,} ({stats.packing_efficiency:.1%})")
    return table


def render_estimate(estimate: Estimate, setting: TrainingSetting, notes: list[str]) -> None:
    """Print an estimate as tables."""
    for note in notes:
        console().print(f"[yellow]note:[/] {note}")
    console().print(setting_table(setting))
    console().print(memory_table(estimate))
    console().print(time_table(estimate))


def render_plan(plan: PlanFile, notes: list[str], searched: int, elapsed_s: float) -> None:
    """Print a plan: chosen setting, memory, time, alternatives and rejections."""
    cluster = plan.cluster
    for note in notes:
        console().print(f"[yellow]note:[/] {note}")
    console().print(
        f"[bold]{plan.model.key}[/] on {cluster.world_size}× {cluster.gpu}, "
        f"seq_len {plan.workload.seq_len}, global batch {plan.workload.global_batch_size} "
        f"— objective {plan.objective}; {searched} settings searched in {elapsed_s * 1000:.0f} ms"
    )
    if plan.dataset is not None:
        console().print(dataset_table(plan.dataset))
    console().print(setting_table(plan.setting, title="Chosen setting"))
    console().print(memory_table(plan.prediction))
    console().print(time_table(plan.prediction))
    if plan.alternatives:
        from rich.markup import escape

        from autotune.cli.tables import Column, print_table

        columns = [
            Column("setting", wrap=True),
            Column("peak GiB", "right"),
            Column("tokens/s", "right"),
            Column("step s", "right", drop_order=2),
            Column("why not chosen", wrap=True, drop_order=1),
        ]
        rows = [
            [
                alt.setting.short(),
                f"{alt.prediction.peak_memory_gib:.1f}",
                f"{alt.prediction.tokens_per_s:,.0f}",
                f"{alt.prediction.step_time_s:.1f}",
                escape(alt.why_not_chosen or "—"),
            ]
            for alt in plan.alternatives
        ]
        print_table("Runner-ups (best of each other method / sharding, in the planner's order)", columns, rows)
    if plan.rejected:
        from rich.table import Table

        console().print("[bold]Rejected[/]")
        grid = Table.grid(padding=(0, 1))
        grid.add_column(no_wrap=True)
        grid.add_column()
        for rejection in plan.rejected:
            grid.add_row("  [red]✗[/]", rejection.reason)
        console().print(grid)
