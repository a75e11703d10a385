"""``autotune plan --gpu a,b --num-gpus 1,8 --json``: one row per GPU type × count, and the choice among them."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from autotune.schemas._base import StrictModel
from autotune.schemas.objective import GridObjective


class GridRowReport(StrictModel):
    """The best setting of one GPU type × count, its run time and cost (or why nothing fits)."""

    gpu: str = Field(description="Catalog GPU key.")
    num_gpus: int = Field(description="GPUs per node.")
    num_nodes: int = Field(description="Nodes.")
    fits: bool = Field(description="Whether a setting fits on these GPUs.")
    setting: str | None = Field(default=None, description="The chosen setting of this row, one line (None: none fits).")
    tokens_per_s: float | None = Field(default=None, description="Training tokens per second over all GPUs.")
    run_time_s: float | None = Field(
        default=None,
        description="The whole run (dataset × epochs) in seconds; without a workload, DEFAULT_RUN_STEPS optimizer "
        "steps (see whole_run).",
    )
    gpu_hours: float | None = Field(default=None, description="GPUs × run time, hours.")
    price_per_gpu_hour: float | None = Field(
        default=None, description="Price used, currency per GPU-hour (None: unknown)."
    )
    cost: float | None = Field(default=None, description="GPU-hours × price (None: no price or nothing fits).")
    price_source: str | None = Field(
        default=None, description="Where the price comes from: each provider's price, page and capture date."
    )
    cost_per_million_tokens: float | None = Field(
        default=None, description="Cost of one million training tokens: price × GPUs / 3600 / tokens_per_s × 10^6."
    )
    band: float | None = Field(
        default=None,
        description="± relative band on run time and cost (the chosen setting's time band): rows whose ranges overlap "
        "tie under --objective time / cost (autotune.planner.grid.break_tie).",
    )
    meets_limits: bool = Field(default=False, description="Fits and meets --deadline and --budget (when given).")
    chosen: bool = Field(default=False, description="The row the objective chose.")
    note: str | None = Field(default=None, description="Why nothing fits, or why the row has no cost.")
    time_uncertainty_fraction: float | None = Field(
        default=None, description="± relative band on the row's times (Estimate.time_uncertainty_fraction)."
    )
    evidence: str | None = Field(
        default=None, description="What backs the row's times: core, public or extrapolated (Estimate.evidence)."
    )


class GridReport(StrictModel):
    """The table of ``plan`` over several GPU types and counts, and the row chosen."""

    objective: GridObjective = Field(description="quality, speed, memory, time or cost (see autotune.planner.grid).")
    whole_run: bool = Field(description="True: run_time_s and cost are the whole run; False: DEFAULT_RUN_STEPS steps.")
    deadline_s: float | None = Field(default=None, description="--deadline in seconds (None: none).")
    budget: float | None = Field(default=None, description="--budget in the currency (None: none).")
    currency: str = Field(description="The currency of every price and cost.")
    prices: str = Field(description="Which prices were used and their date.")
    rows: list[GridRowReport] = Field(description="One row per GPU type × count, in the order given.")
    chosen: GridRowReport = Field(description="The chosen row (also marked chosen in rows).")
    notes: list[str] = Field(
        default_factory=list,
        description="One line each: the tie inside the model's band and how it was broken, a method chosen that the "
        "user did not ask for, what --num-samples assumes (autotune.planner.grid).",
    )
    plan_file: dict[str, Any] = Field(description="The plan file of the chosen row (what -o writes).")
