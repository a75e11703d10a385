"""The plan file written by ``autotune plan -o plan.yaml`` and read by ``autotune launch``.

Plans carry ``schema_version``; :func:`migrate` upgrades older files (and refuses newer ones), so a
plan written by an older autotune keeps working.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from autotune.errors import ConfigError
from autotune.schemas._base import StrictModel
from autotune.schemas.estimate import Estimate
from autotune.schemas.model import ModelSpec
from autotune.schemas.setting import TrainingSetting, Workload

PLAN_SCHEMA_VERSION: Literal[1] = 1


class ClusterChoice(StrictModel):
    """The hardware named by the user (GPU catalog key and counts)."""

    gpu: str = Field(description="GPU catalog key, e.g. 'rtx-4090'.")
    num_gpus_per_node: int = Field(default=1, ge=1, le=64)
    num_nodes: int = Field(default=1, ge=1, le=4096)
    host_memory_gib_per_node: float | None = Field(default=None, gt=0)

    @property
    def world_size(self) -> int:
        """Total GPUs (= data-parallel ranks; autotune does no tensor or pipeline parallelism)."""
        return self.num_gpus_per_node * self.num_nodes


class Alternative(StrictModel):
    """A runner-up setting with its prediction."""

    setting: TrainingSetting
    prediction: Estimate


class Rejection(StrictModel):
    """Why a family of settings (e.g. 'full', 'qlora', 'ddp') was rejected, in one line with numbers."""

    family: str
    reason: str


class PlanFile(StrictModel):
    """Everything ``autotune launch`` needs to run exactly the planned setting."""

    schema_version: Literal[1] = PLAN_SCHEMA_VERSION
    autotune_version: str
    model: ModelSpec = Field(description="Architecture the plan was computed for.")
    model_source: str = Field(
        description="Where the weights come from: a Hugging Face repo id, a local model directory or a .gguf file."
    )
    cluster: ClusterChoice
    workload: Workload
    setting: TrainingSetting
    prediction: Estimate
    objective: Literal["quality", "speed", "memory"] = "quality"
    calibration: str = Field(default="seeds", description="Name of the calibration used.")
    alternatives: list[Alternative] = Field(default_factory=list)
    rejected: list[Rejection] = Field(default_factory=list)


def migrate(data: dict[str, Any]) -> dict[str, Any]:
    """Upgrade a plan dict read from YAML to the current schema version.

    Raises:
        ConfigError: the file has no or a non-integer ``schema_version``, or one newer than this
            autotune understands.
    """
    version = data.get("schema_version")
    if not isinstance(version, int):
        raise ConfigError("plan file has no integer schema_version: is it a plan written by 'autotune plan -o'?")
    if version > PLAN_SCHEMA_VERSION:
        raise ConfigError(
            f"plan schema_version {version} is newer than this autotune understands "
            f"({PLAN_SCHEMA_VERSION}); upgrade autotune"
        )
    # Version 1 is the first released schema; later versions add upgrade steps here, one per version.
    return data
