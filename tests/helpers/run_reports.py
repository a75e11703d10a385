"""Synthetic GPU run reports for calibration tests (what ``autotune launch`` would write on a GPU)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from autotune.schemas.plan import PlanFile
from autotune.schemas.run_report import RunReport

NOW = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)


def make_report(plan: PlanFile, memory_scale: float = 1.0, time_scale: float = 1.0, **fields: Any) -> RunReport:
    """A report of a GPU run measuring ``scale`` × the plan's prediction."""
    p = plan.prediction
    values: dict[str, Any] = {
        "status": "completed",
        "steps": 10,
        "max_steps": 10,
        "losses": [2.0, 1.9],
        "loss_steps": [1, 2],
        "tokens_seen": 163840,
        "peak_memory_gib_measured": p.peak_memory_gib * memory_scale,
        "peak_reserved_gib_measured": p.peak_reserved_gib * memory_scale,
        "memory_kind": "allocated",
        "step_time_s_measured": p.step_time_s * time_scale,
        "micro_step_time_s_measured": p.micro_step_time_s * time_scale,
        "prediction": p,
        "model": plan.model.key,
        "model_source": plan.model_source,
        "gpu": plan.cluster.gpu,
        "world_size": 1,
        "device": "cuda:0 (NVIDIA GeForce RTX 4090)",
        "setting": plan.setting,
        "workload": plan.workload,
        "started_at": NOW,
        "finished_at": NOW,
        "autotune_version": "0.1.0",
    }
    values.update(fields)
    return RunReport.model_validate(values)
