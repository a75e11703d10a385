"""Turn command-line values into validated domain objects (stage 1 validation, one-line errors)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from autotune.errors import AutotuneError, InvalidRequestError
from autotune.planner.request import Overrides, PlanRequest
from autotune.planner.space import assumed_host_memory_gib
from autotune.profiles.catalog import resolve_gpu
from autotune.profiles.model_source import resolve_model_source
from autotune.schemas.calibration import CostCoefficients
from autotune.schemas.dataset_stats import PaddedBatches
from autotune.schemas.hardware import ClusterSpec, GpuSpec
from autotune.schemas.lora_targets import lora_dropout_note
from autotune.schemas.model import ModelSpec
from autotune.schemas.setting import TrainingSetting, Workload
from autotune.validation import format_validation_error

SchemaT = TypeVar("SchemaT", bound=BaseModel)

OPTION_NAMES = {
    "seq_len": "--seq-len",
    "global_batch_size": "--global-batch-size",
    "num_samples": "--num-samples",
    "dataset_tokens": "--dataset-tokens",
    "epochs": "--epochs",
    "micro_batch_size": "--micro-batch-size",
    "grad_accum": "--grad-accum",
    "lora_rank": "--lora-rank",
    "lora_alpha": "--lora-alpha",
    "lora_dropout": "--lora-dropout",
    "lora_targets": "--lora-targets",
    "adapter_dtype": "--adapter-dtype",
    "kernels": "--kernels",
    "num_gpus_per_node": "--num-gpus",
    "num_nodes": "--num-nodes",
    "host_memory_gib_per_node": "--host-memory-gib",
}


def validated(schema: type[SchemaT], **values: Any) -> SchemaT:
    """Build a schema from CLI values; a validation error becomes one line naming the option.

    Raises:
        InvalidRequestError: the first validation error, e.g. "--seq-len: Input should be greater than ...".
    """
    try:
        return schema.model_validate(values)
    except ValidationError as error:
        raise InvalidRequestError(format_validation_error(error, schema, flags=OPTION_NAMES)) from None


def resolve_model(name: str) -> tuple[ModelSpec, str]:
    """A model from the catalog, a config.json / model directory, or a .gguf file; returns (spec, weights source).

    The rule is :func:`autotune.profiles.model_source.resolve_model_source` (a relative path from the working
    directory).

    Raises:
        UnknownNameError / ConfigError: unknown name (with suggestions) or unreadable file.
    """
    source = resolve_model_source(name)
    return source.spec, source.weights


def shapes_note(spec: ModelSpec, source: str) -> list[str]:
    """``[note]`` when the weights ``source`` is not the catalog entry whose shapes are used, else ``[]``."""
    if source in (spec.hf_repo_id, spec.key) or Path(source).exists():
        return []
    entry = f"{spec.key} ({spec.hf_repo_id})" if spec.hf_repo_id else spec.key
    return [f"weights {source}; shapes from the catalog entry {entry}"]


def resolve_cluster(
    gpu: str, num_gpus: int, num_nodes: int, host_memory_gib: float | None
) -> tuple[ClusterSpec, list[str]]:
    """The cluster and notes to show (alias resolution).

    The host RAM assumed when ``host_memory_gib`` is None is noted by :func:`host_memory_note`, once it is known that a
    setting offloads.
    """
    gpu_spec, note = resolve_gpu(gpu)
    notes = [note] if note else []
    if host_memory_gib is None:
        host_memory_gib = assumed_host_memory_gib(gpu_spec.memory_gib, max(1, num_gpus))
    cluster = validated(
        ClusterSpec,
        gpu=gpu_spec,
        num_gpus_per_node=num_gpus,
        num_nodes=num_nodes,
        host_memory_gib_per_node=host_memory_gib,
    )
    return cluster, notes


def catalog_gpu(name: str) -> GpuSpec | None:
    """The catalog entry a GPU name (as ``nvidia-smi -L`` prints it) resolves to, or None when none does."""
    try:
        return resolve_gpu(name)[0]
    except AutotuneError:
        return None


def host_memory_note(cluster: ClusterSpec, given_gib: float | None, settings: Iterable[TrainingSetting]) -> list[str]:
    """``[note]`` saying which host RAM per node was assumed, when it was not given and one of ``settings`` offloads.

    Offloading to the CPU is the only case it matters for; else ``[]``.
    """
    assumed = cluster.host_memory_gib_per_node
    if given_gib is not None or assumed is None or not any(setting.offloads_to_cpu for setting in settings):
        return []
    return [f"host RAM per node assumed {assumed:.0f} GiB for offload (set --host-memory-gib)"]


def lora_dropout_notes(model: ModelSpec, settings: Iterable[TrainingSetting]) -> list[str]:
    """``[note]`` when an adapter setting among ``settings`` will run with its LoRA dropout forced to 0, else ``[]``.

    That happens with peft's ParamWrapper on an MoE's parameter-stored experts (:mod:`autotune.schemas.lora_targets`).
    """
    for setting in settings:
        if setting.uses_adapters:
            note = lora_dropout_note(model.model_type, setting.lora_targets, setting.lora_dropout)
            if note:
                return [note]
    return []


def kernels_notes(settings: Iterable[TrainingSetting]) -> list[str]:
    """``[note]`` when a setting asks for fused kernels (``kernels: liger``), which no GPU run of the core measured yet.

    The cost model prices them from Liger Kernel's source (``costmodel.fused_kernels``).
    """
    if any(setting.kernels != "none" for setting in settings):
        return ["kernels liger: priced from Liger Kernel's source (memory and traffic of its fused kernels), not yet "
                "measured on the core"]  # fmt: skip
    return []


def offload_time_notes(cluster: ClusterSpec, setting: TrainingSetting) -> list[str]:
    """``[note]`` when ``setting`` offloads to the CPU on a single GPU, whose time the core's runs showed optimistic.

    The core's single-GPU offload runs on an H200 took 1.7–2.3× the predicted time (the PCIe copies; docs/cost-model.md
    §7.7, ``profiles/measurements/autotune-core-h200``); the terms are not refitted on two rows, so the plan says so.
    """
    if not setting.offloads_to_cpu or cluster.world_size != 1:
        return []
    return [
        f"sharding {setting.sharding} on one GPU: the core's CPU-offload runs on one GPU took 1.7–2.3× the predicted "
        "time (PCIe copies; docs/cost-model.md §7.7), so its tokens/s here is likely optimistic"
    ]


def approximation_note(key: str, text: str) -> str:
    """``'falcon-7b: <text>'`` for one of a model's ``approximations``, without the family name the text starts with.

    The families name themselves (``'falcon: attention and MLP run in parallel ...'``); the note names the model, so
    ``falcon-7b: falcon: ...`` becomes ``falcon-7b: attention and MLP ...`` (a prefix that is not the model's family,
    e.g. ``mixtral MoE:``, is kept).
    """
    family, separator, rest = text.partition(": ")
    if separator and (key == family or key.startswith(family + "-")):
        return f"{key}: {rest}"
    return f"{key}: {text}"


def seq_len_note(spec: ModelSpec, seq_len: int) -> str | None:
    """The note for a sequence length above the model's ``max_position_embeddings`` (planned anyway), or None."""
    if seq_len <= spec.max_position_embeddings:
        return None
    return f"--seq-len {seq_len} exceeds {spec.key}'s max_position_embeddings {spec.max_position_embeddings}"


def build_request(
    *,
    model: str,
    gpu: str,
    num_gpus: int,
    num_nodes: int,
    host_memory_gib: float | None,
    seq_len: int,
    global_batch_size: int,
    num_samples: int | None,
    dataset_tokens: int | None,
    epochs: float,
    objective: str,
    overrides: Overrides,
    padded: PaddedBatches | None = None,
    coefficients: CostCoefficients | None,
    calibration_name: str,
) -> tuple[PlanRequest, list[str]]:
    """Validate every planning input and build the request; returns it with notes to show the user.

    ``padded``: a dataset's padded batches (their ``num_samples`` replaces ``num_samples``). ``overrides`` is already
    validated (:meth:`autotune.cli.setting_options.SettingOptions.overrides`); the objective is
    checked by :class:`PlanRequest` (its ``Objective`` type, the one list of objectives).

    Raises:
        AutotuneError: unknown model or GPU, or an invalid value (one line naming the option).
    """
    spec, source = resolve_model(model)
    cluster, notes = resolve_cluster(gpu, num_gpus, num_nodes, host_memory_gib)
    notes += shapes_note(spec, source)
    notes += [approximation_note(spec.key, text) for text in spec.approximations]
    sizes: dict[str, Any] = {"num_samples": num_samples, "dataset_tokens": dataset_tokens}
    sizes.update(padded.model_dump() if padded is not None else {})
    workload = validated(Workload, seq_len=seq_len, global_batch_size=global_batch_size, epochs=epochs, **sizes)
    notes += [note for note in [seq_len_note(spec, seq_len)] if note]
    request = validated(
        PlanRequest,
        model=spec,
        model_source=source,
        cluster=cluster,
        workload=workload,
        objective=objective,
        overrides=overrides,
        coefficients=coefficients,
        calibration_name=calibration_name,
    )
    return request, notes
