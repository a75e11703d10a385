"""Build and write ``run_report.json``: measured figures next to the plan's predictions."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import torch

import autotune
from autotune.fileio import write_atomic
from autotune.schemas.plan import PlanFile
from autotune.schemas.run_report import RunReport, RunStatus
from autotune.trainer.callbacks import RunMetrics
from autotune.trainer.memory import peak_memory


def max_over_ranks(value: float | None) -> float | None:
    """The maximum of ``value`` over all ranks (itself when not distributed; None stays None)."""
    if value is None or not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return value
    tensor = torch.tensor([value], dtype=torch.float64)
    if torch.distributed.get_backend() == "nccl":
        tensor = tensor.cuda()
    torch.distributed.all_reduce(tensor, op=torch.distributed.ReduceOp.MAX)
    return float(tensor.item())


def describe_device(cpu: bool) -> str:
    """'cpu' or 'cuda:N (device name)' for the report."""
    if cpu or not torch.cuda.is_available():
        return "cpu"
    index = torch.cuda.current_device()
    return f"cuda:{index} ({torch.cuda.get_device_name(index)})"


def build_report(
    *,
    plan: PlanFile,
    status: RunStatus,
    message: str,
    steps: int,
    max_steps: int,
    resumed_from_step: int,
    metrics: RunMetrics,
    world_size: int,
    device: str,
    started_at: datetime,
    finished_at: datetime,
    reduce_over_ranks: bool = True,
) -> RunReport:
    """Assemble the report.

    With ``reduce_over_ranks`` (a run that ended normally) peak memory is the maximum over ranks and
    this must be called on every rank; after a failure only the local figures are used, since the
    other ranks may never reach the collective.
    """
    peak_gib, reserved_gib, kind = peak_memory()
    if reduce_over_ranks:
        peak_gib, reserved_gib = max_over_ranks(peak_gib) or 0.0, max_over_ranks(reserved_gib)
    return RunReport(
        status=status,
        message=message,
        steps=steps,
        max_steps=max_steps,
        resumed_from_step=resumed_from_step,
        losses=metrics.losses,
        loss_steps=metrics.loss_steps,
        eval_losses=metrics.eval_losses,
        eval_loss_steps=metrics.eval_loss_steps,
        tokens_seen=max(metrics.tokens_at_end - metrics.tokens_at_start, 0),
        peak_memory_gib_measured=peak_gib,
        peak_reserved_gib_measured=reserved_gib,
        memory_kind="allocated" if kind == "allocated" else "cpu-rss",
        tokens_per_s_measured=metrics.tokens_per_s(),
        step_time_s_measured=metrics.median_step_time_s(),
        micro_step_time_s_measured=metrics.median_micro_step_time_s(),
        profiled_steps=sorted(step for step in metrics.untimed_steps if step <= steps),
        prediction=plan.prediction,
        model=plan.model.key,
        model_source=plan.model_source,
        gpu=plan.cluster.gpu,
        world_size=world_size,
        device=device,
        cpu_threads=torch.get_num_threads() if device == "cpu" else None,
        setting=plan.setting,
        workload=plan.workload,
        started_at=started_at,
        finished_at=finished_at,
        autotune_version=autotune.__version__,
    )


def write_report(report: RunReport, path: Path) -> None:
    """Write the report as indented JSON (atomically, :func:`autotune.fileio.write_atomic`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, report.model_dump_json(indent=2) + "\n", overwrite=True, what="run report")
