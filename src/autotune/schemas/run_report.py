"""The report the training core writes at the end of every run (``OUT/run_report.json``).

It puts what was measured next to what the plan predicted, so that ``autotune calibrate`` can refit
the cost model from real runs. Memory is per process (= per GPU): on a GPU the peak allocated by
tensors (``torch.cuda.max_memory_allocated``) and the peak reserved by the caching allocator
(``torch.cuda.max_memory_reserved``); on the CPU the peak resident set size of the process
(``getrusage(RUSAGE_SELF).ru_maxrss``), which also counts the Python interpreter and libraries and is
therefore not comparable with a GPU prediction.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import Field, model_validator

from autotune.schemas._base import StrictModel
from autotune.schemas.estimate import Estimate
from autotune.schemas.setting import TrainingSetting, with_adapter_dtype_recorded
from autotune.schemas.workload import Workload

RunStatus = Literal["completed", "interrupted", "failed"]
RunMemoryKind = Literal["allocated", "cpu-rss"]

RUN_REPORT_SCHEMA_VERSION: Literal[4] = 4
V1_PREDICTION_FIELDS = ("peak_memory_gib", "peak_reserved_gib", "tokens_per_s", "step_time_s", "micro_step_time_s")
"""Version 1 copied these five fields of the plan's :class:`Estimate`; version 2 embeds the whole prediction.
Version 3 records the setting's ``adapter_dtype`` (versions 1 and 2 ran fp32 adapters: peft's default). Version 4
writes the workload's batches and eval set as sub-models (plan schema 3); ``Workload`` reads the flat fields of the
earlier versions."""


class RunReport(StrictModel):
    """What one invocation of ``python -m autotune.trainer`` did, measured, next to the plan's predictions."""

    schema_version: Literal[4] = RUN_REPORT_SCHEMA_VERSION
    status: RunStatus = Field(description="completed, interrupted (SIGINT/SIGTERM, checkpoint saved) or failed.")
    message: str = Field(default="", description="Why the run was interrupted or failed; empty when completed.")
    steps: int = Field(ge=0, description="Global optimizer step reached (counting steps of resumed runs).")
    max_steps: int = Field(ge=0, description="Optimizer steps the run was set up to reach.")
    resumed_from_step: int = Field(default=0, ge=0, description="Step of the checkpoint resumed from; 0 if fresh.")
    losses: list[float] = Field(
        description="Training loss of each logged step of the whole run (a resumed run's steps before the resume "
        "come from its checkpoint's trainer_state.json)."
    )
    loss_steps: list[int] = Field(description="The global step of each entry of losses.")
    eval_losses: list[float] = Field(
        default_factory=list,
        description="Eval loss on the held-out data (--eval-dataset / --eval-fraction), every --eval-steps and at "
        "the end; empty without held-out data.",
    )
    eval_loss_steps: list[int] = Field(default_factory=list, description="The global step of each eval loss.")
    tokens_seen: int = Field(ge=0, description="Non-padding input tokens processed by this invocation, all ranks.")
    peak_memory_gib_measured: float = Field(
        ge=0, description="GPU: max_memory_allocated; CPU: peak RSS of the process, GiB (max over ranks)."
    )
    peak_reserved_gib_measured: float | None = Field(
        default=None, ge=0, description="GPU: max_memory_reserved, GiB (max over ranks); None on CPU."
    )
    memory_kind: RunMemoryKind = Field(description="What peak_memory_gib_measured measures.")
    tokens_per_s_measured: float | None = Field(
        default=None,
        ge=0,
        description="Real training tokens per second over all ranks: the tokens of the steps after the first / their "
        "summed wall time (profiled steps left out).",
    )
    step_time_s_measured: float | None = Field(
        default=None,
        ge=0,
        description="Median wall time of one optimizer step, seconds (first step excluded).",
    )
    micro_step_time_s_measured: float | None = Field(
        default=None, ge=0, description="Median forward+backward time of one micro batch, seconds."
    )
    profiled_steps: list[int] = Field(
        default_factory=list,
        description="Global steps recorded with --profile-steps (OUT/profile/): left out of the timings above.",
    )
    prediction: Estimate | None = Field(
        description="The plan's prediction for this run (None in reports written with schema_version 1)."
    )
    model: str = Field(description="Model catalog key of the plan.")
    model_source: str = Field(description="Where the weights were loaded from.")
    gpu: str = Field(description="GPU catalog key of the plan (the planned hardware, not necessarily the device).")
    world_size: int = Field(ge=1, description="Processes (ranks) that trained.")
    device: str = Field(description="Device the run used, e.g. 'cpu' or 'cuda:0 (NVIDIA H100 80GB HBM3)'.")
    cpu_threads: int | None = Field(
        default=None,
        ge=1,
        description="A CPU run's intra-op threads per process (torch.get_num_threads(): the launcher's "
        "OMP_NUM_THREADS rule unless the user set it); a CPU run's speed scales with it. None on a GPU and in "
        "reports written before it was recorded.",
    )
    setting: TrainingSetting
    workload: Workload
    started_at: datetime
    finished_at: datetime
    autotune_version: str

    @model_validator(mode="before")
    @classmethod
    def _upgrade(cls, data: Any) -> Any:
        """Read a report of version 1, 2 or 3.

        Version 1: its five copied prediction fields are dropped (``prediction`` is None). Versions 1 and 2: a
        setting without ``adapter_dtype`` ran fp32 adapters (``setting.with_adapter_dtype_recorded``). Versions 1 to 3:
        the workload's flat fields (read by ``Workload`` itself).
        """
        if not isinstance(data, dict) or data.get("schema_version") not in (1, 2, 3):
            return data
        if data["schema_version"] == 3:
            return dict(data, schema_version=RUN_REPORT_SCHEMA_VERSION)
        if data["schema_version"] == 1:
            data = {key: value for key, value in data.items() if key not in V1_PREDICTION_FIELDS}
            data["prediction"] = None
        if "setting" in data:
            data = dict(data, setting=with_adapter_dtype_recorded(data["setting"]))
        return dict(data, schema_version=RUN_REPORT_SCHEMA_VERSION)
