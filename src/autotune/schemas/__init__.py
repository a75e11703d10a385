"""Pydantic schemas shared by every package (the bottom layer: they import no other package).

Modules:
  time_correction  the local time correction a calibration holds (rows, kernel, scale)
  evidence       the evidence label of an answer, its band and MFU cap (EvidenceTable)
  interconnect   a network profile: its links' bandwidths and sources
  _base            StrictModel / FrozenModel (unknown keys rejected)
  hardware         GpuSpec, ClusterSpec (world_size)
  model            ModelSpec (architecture shapes)
  setting          TrainingSetting (sharding traits, default precision / sharding)
  workload         Workload: sequence length, batch, dataset size, its batches (filled / padded / packed), eval set
  estimate         Estimate (gpu_memory_need_gib: the sum ``fits`` compares)
  gpu_grid         GridReport / GridRowReport: the table of a plan across GPU types and counts
  prices           PriceTable: GPU-hour prices with their providers, date and sources
  memory_parts     the one vocabulary of memory part names (memory model, headroom band, planner, plots, trace)
  plan             PlanFile, ClusterChoice (world_size), schema migration
  objective        the objectives a plan is chosen by (the planner's, the table's): the one list
  recipe           TrainingRecipe: learning rate, schedule, warm-up, weight decay by method (cited defaults)
  plan_io          plan.yaml read / write (beside its schema; the launcher and the trainer both use it)
  plan_changes     a plan's fingerprint and the fields two differ in (the --resume rule of launcher and trainer)
  calibration      CostCoefficients, Measurement, MeasurementSet
  run_report       RunReport (embeds the plan's Estimate)
  trainer_options  TrainerOptions: the one schema of the training core's options
  training_stack   the tested versions of the training stack and the refusal of any other
  dataset_format   the fields a dataset must hold for each format (instruction, chat, text)
  dataset_rows     the rule for one dataset row and a streamed check of a local dataset file
  packing          best-fit-decreasing bins of whole examples, packing efficiency, the packed batch layout
  dataset_stats    a dataset's token lengths, their distribution at a seq_len, its packed blocks, its fingerprint
  lora_targets     which LoRA targets peft builds for an architecture (shared by cost model and training core)
  trace            TraceReport: what ``autotune trace`` reports (live bytes per phase, op counts)

The names below are re-exported lazily (PEP 562 ``__getattr__``): ``from autotune.schemas import PlanFile``
imports ``plan`` only, so a command loads just the schemas it uses (cold start-up of ``autotune plan``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from autotune.schemas.calibration import CostCoefficients, Measurement, MeasurementSet
    from autotune.schemas.estimate import Estimate
    from autotune.schemas.hardware import ClusterSpec, GpuSpec
    from autotune.schemas.model import ModelSpec
    from autotune.schemas.plan import PLAN_SCHEMA_VERSION, ClusterChoice, PlanFile, migrate
    from autotune.schemas.run_report import RunReport
    from autotune.schemas.setting import TrainingSetting
    from autotune.schemas.workload import Workload

_HOMES: dict[str, str] = {
    "CostCoefficients": "calibration",
    "Measurement": "calibration",
    "MeasurementSet": "calibration",
    "Estimate": "estimate",
    "ClusterSpec": "hardware",
    "GpuSpec": "hardware",
    "ModelSpec": "model",
    "PLAN_SCHEMA_VERSION": "plan",
    "ClusterChoice": "plan",
    "PlanFile": "plan",
    "migrate": "plan",
    "RunReport": "run_report",
    "TrainingSetting": "setting",
    "Workload": "workload",
}
"""Re-exported name → the module of this package that defines it."""


def __getattr__(name: str) -> Any:
    """Import a re-exported name from its module on first use.

    Raises:
        AttributeError: ``name`` is not re-exported here.
    """
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)


__all__ = [
    "PLAN_SCHEMA_VERSION",
    "ClusterChoice",
    "ClusterSpec",
    "CostCoefficients",
    "Estimate",
    "GpuSpec",
    "Measurement",
    "MeasurementSet",
    "ModelSpec",
    "PlanFile",
    "RunReport",
    "TrainingSetting",
    "Workload",
    "migrate",
]
