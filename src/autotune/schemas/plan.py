"""The plan file written by ``autotune plan -o plan.yaml`` and read by ``autotune launch``.

Plans carry ``schema_version``; :func:`migrate` upgrades older files (and refuses newer ones), so a
plan written by an older autotune keeps working.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from autotune.errors import ConfigError
from autotune.schemas._base import StrictModel
from autotune.schemas.dataset_stats import DatasetStats
from autotune.schemas.estimate import Estimate
from autotune.schemas.hardware import ClusterSpec, GpuSpec
from autotune.schemas.model import ModelSpec
from autotune.schemas.objective import Objective
from autotune.schemas.recipe import TrainingRecipe, default_recipe
from autotune.schemas.setting import TrainingSetting, with_adapter_dtype_recorded
from autotune.schemas.trainer_options import EvalData
from autotune.schemas.workload import Workload

PLAN_SCHEMA_VERSION: Literal[3] = 3


class ClusterChoice(StrictModel):
    """The hardware named by the user (GPU catalog key and counts)."""

    gpu: str = Field(description="GPU catalog key, e.g. 'rtx-4090'.")
    num_gpus_per_node: int = Field(default=1, ge=1, le=64, description="GPUs on each node.")
    num_nodes: int = Field(default=1, ge=1, le=4096, description="Nodes.")
    host_memory_gib_per_node: float | None = Field(
        default=None, gt=0, description="Host RAM per node in GiB (given, or the assumption offload was checked with)."
    )
    inter_node_gb_per_s: float | None = Field(
        default=None, gt=0, description="Network bandwidth per node per direction, GB/s, planned with (None: 25)."
    )
    intra_node_gb_per_s: float | None = Field(
        default=None, gt=0, description="GPU-GPU bandwidth inside a node, GB/s, planned with (None: the GPU's link)."
    )
    intra_node_bus_measured: bool = Field(
        default=False, description="intra_node_gb_per_s is an achieved nccl-tests bus bandwidth."
    )
    network: str = Field(default="", description="The interconnect profiles planned with, in words.")

    @property
    def world_size(self) -> int:
        """Total GPUs (= data-parallel ranks; autotune does no tensor or pipeline parallelism)."""
        return self.num_gpus_per_node * self.num_nodes

    def spec(self, gpu: GpuSpec) -> ClusterSpec:
        """The cluster the cost model takes: these counts on ``gpu`` (the catalog entry of :attr:`gpu`)."""
        links = {"inter_node_gb_per_s": self.inter_node_gb_per_s} if self.inter_node_gb_per_s is not None else {}
        return ClusterSpec(
            gpu=gpu,
            num_gpus_per_node=self.num_gpus_per_node,
            num_nodes=self.num_nodes,
            host_memory_gib_per_node=self.host_memory_gib_per_node,
            intra_node_gb_per_s=self.intra_node_gb_per_s,
            intra_node_bus_measured=self.intra_node_bus_measured,
            network=self.network,
            **links,
        )


class Alternative(StrictModel):
    """A runner-up setting with its prediction."""

    setting: TrainingSetting = Field(description="The runner-up setting.")
    prediction: Estimate = Field(description="Its predicted memory and time.")
    why_not_chosen: str | None = Field(
        default=None,
        description="Why the planner's rule put the chosen setting first: reserved memory at the card, the "
        "objective, within the tie band (faster by less than 2 % per extra moving part) or slower.",
    )


class Rejection(StrictModel):
    """Why a family of settings (e.g. 'full', 'qlora', 'ddp') was rejected, in one line with numbers."""

    family: str = Field(description="The method or sharding rejected, e.g. 'full' or 'fsdp'.")
    reason: str = Field(description="Why: what its closest setting needs against what the GPUs have.")


class PlanFile(StrictModel):
    """Everything ``autotune launch`` needs to run exactly the planned setting."""

    schema_version: Literal[3] = Field(default=PLAN_SCHEMA_VERSION, description="Plan file format version.")
    autotune_version: str = Field(description="Version of autotune that wrote the plan.")
    model: ModelSpec = Field(description="Architecture the plan was computed for.")
    model_source: str = Field(
        description="Where the weights come from: a Hugging Face repo id, a local model directory or a .gguf file."
    )
    cluster: ClusterChoice = Field(description="The GPUs planned for.")
    workload: Workload = Field(description="Sequence length, global batch and data size.")
    setting: TrainingSetting = Field(description="The chosen setting.")
    prediction: Estimate = Field(description="The chosen setting's predicted memory and time.")
    training: TrainingRecipe = Field(
        description="Learning rate, schedule, warm-up, weight decay and clipping the run trains with "
        "(the method's recipe, autotune.schemas.recipe, unless edited)."
    )
    objective: Objective = Field(default="quality", description="What the planner optimized: quality, speed or memory.")
    calibration: str = Field(default="seeds", description="Name of the calibration used.")
    dataset: DatasetStats | None = Field(
        default=None,
        description="The dataset the plan was made for (plan --dataset): fingerprint, lengths, packed blocks.",
    )
    eval_data: EvalData | None = Field(
        default=None,
        description="Where the eval loss comes from (plan --eval-dataset / --eval-fraction): autotune launch "
        "evaluates on it every workload.eval.steps unless the launch gives eval options of its own.",
    )
    alternatives: list[Alternative] = Field(
        default_factory=list, description="Runner-ups: the best setting of each other method and sharding."
    )
    rejected: list[Rejection] = Field(
        default_factory=list, description="One line per family with no setting that fits."
    )

    @model_validator(mode="before")
    @classmethod
    def _default_training(cls, data: Any) -> Any:
        """A plan built without ``training`` trains with its method's recipe (:func:`default_recipe`)."""
        if isinstance(data, dict) and data.get("training") is None:
            setting = data.get("setting")
            method = setting.method if isinstance(setting, TrainingSetting) else None
            if isinstance(setting, dict):
                method = setting.get("method", "lora")
            data = dict(data, training=default_recipe(str(method or "lora")))
        return data


def migrate(data: dict[str, Any]) -> dict[str, Any]:
    """Upgrade a plan dict read from YAML to the current schema version.

    Raises:
        ConfigError: the file has no or a non-integer ``schema_version``, or one newer than this
            autotune understands.
    """
    version = data.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise ConfigError("plan file has no integer schema_version: is it a plan written by 'autotune plan -o'?")
    if version > PLAN_SCHEMA_VERSION:
        raise ConfigError(
            f"plan schema_version {version} is newer than this autotune understands "
            f"({PLAN_SCHEMA_VERSION}); upgrade autotune"
        )
    if version < 1:
        raise ConfigError(
            f"plan schema_version {version} is not a version autotune ever wrote (1..{PLAN_SCHEMA_VERSION})"
        )
    if version == 1:
        data = _migrate_v1(data)
    if data["schema_version"] == 2:
        data = _migrate_v2(data)
    return data


def _migrate_v1(data: dict[str, Any]) -> dict[str, Any]:
    """Version 1 → 2: v1 plans ran adapters in fp32 and had no ``training`` recipe.

    The fp32 adapters are recorded by ``setting.with_adapter_dtype_recorded``.

    The recipe is left out, so :class:`PlanFile` fills in the method's default (``_default_training``): v1's one
    learning rate for every method (2e-4) made full fine-tuning diverge, so it is not carried over.
    """
    upgraded = dict(data, schema_version=2)
    for holder in [upgraded, *(a for a in upgraded.get("alternatives") or () if isinstance(a, dict))]:
        if "setting" in holder:
            holder["setting"] = with_adapter_dtype_recorded(holder["setting"])
    return upgraded


def _migrate_v2(data: dict[str, Any]) -> dict[str, Any]:
    """Version 2 → 3: the workload's dataset fields became its ``batches`` (filled / padded / packed) and ``eval``.

    Version 2 wrote them flat (``tokens_per_sample``, ``padded_length_quantiles``, ``eval_samples``, …);
    :class:`~autotune.schemas.workload.Workload` reads those into the sub-models (``Workload._from_flat_fields``), the
    one rule for every file that holds a workload (plan files, run reports, measurement files).
    """
    return dict(data, schema_version=3)
