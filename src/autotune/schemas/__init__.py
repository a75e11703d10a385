"""Pydantic schemas shared by every package: hardware, model, setting, estimate, plan, calibration."""

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
