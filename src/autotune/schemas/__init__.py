"""Pydantic schemas shared by every package (the bottom layer: they import no other package).

Modules:
  _base            StrictModel / FrozenModel (unknown keys rejected)
  hardware         GpuSpec, ClusterSpec (world_size)
  model            ModelSpec (architecture shapes)
  setting          TrainingSetting (sharding traits, default precision / sharding), Workload
  estimate         Estimate (gpu_memory_need_gib: the sum ``fits`` compares)
  plan             PlanFile, ClusterChoice (world_size), schema migration
  plan_io          plan.yaml read / write (beside its schema; the launcher and the trainer both use it)
  calibration      CostCoefficients, Measurement, MeasurementSet
  run_report       RunReport (embeds the plan's Estimate)
  trainer_options  TrainerOptions: the one schema of the training core's options
"""

from autotune.schemas.calibration import CostCoefficients, Measurement, MeasurementSet
from autotune.schemas.estimate import Estimate
from autotune.schemas.hardware import ClusterSpec, GpuSpec
from autotune.schemas.model import ModelSpec
from autotune.schemas.plan import PLAN_SCHEMA_VERSION, ClusterChoice, PlanFile, migrate
from autotune.schemas.run_report import RunReport
from autotune.schemas.setting import TrainingSetting, Workload

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
