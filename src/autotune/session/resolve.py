"""Turn command-line values into validated domain objects (stage 1 validation, one-line errors)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from autotune.errors import AutotuneError, InvalidRequestError
from autotune.planner.evaluation import with_eval
from autotune.planner.request import Overrides, PlanRequest
from autotune.planner.space import assumed_host_memory_gib
from autotune.profiles.catalog import resolve_gpu
from autotune.profiles.interconnects import resolve_network
from autotune.profiles.model_source import resolve_model_source
from autotune.schemas.calibration import CostCoefficients
from autotune.schemas.dataset_stats import DatasetStats
from autotune.schemas.hardware import ClusterSpec, GpuSpec
from autotune.schemas.lora_targets import lora_dropout_note
from autotune.schemas.model import ModelSpec
from autotune.schemas.setting import TrainingSetting
from autotune.schemas.trainer_options import EvalData, check_eval_options
from autotune.schemas.workload import Batches, EvalSet, PaddedBatches, Workload
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
    "eval_dataset": "--eval-dataset",
    "eval_fraction": "--eval-fraction",
    "eval_steps": "--eval-steps",
    "steps": "--eval-steps",  # EvalSet.steps
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


def eval_data(eval_dataset: str | None, eval_fraction: float | None, eval_steps: int | None) -> EvalData | None:
    """The eval options of ``plan`` / ``estimate`` validated by launch's rules; None without a held-out source.

    A local ``eval_dataset`` comes back as an absolute path (a plan file's launch may run elsewhere).

    The bounds are :class:`autotune.schemas.trainer_options.EvalData`'s fields (launch's), the combination
    :func:`autotune.schemas.trainer_options.check_eval_options`.

    Raises:
        InvalidRequestError: one line naming the option (``--eval-fraction 1.5``, both sources, ``--eval-steps``
            without a source, ``--eval-steps 0``).
    """
    try:
        check_eval_options(eval_dataset, eval_fraction, eval_steps)
    except ValueError as error:
        raise InvalidRequestError(str(error)) from None
    if eval_steps is not None:
        validated(EvalSet, steps=eval_steps)
    if eval_dataset is None and eval_fraction is None:
        return None
    if eval_dataset is not None and Path(eval_dataset).expanduser().exists():
        eval_dataset = str(Path(eval_dataset).expanduser().absolute())  # the launch may start elsewhere
    return validated(EvalData, eval_dataset=eval_dataset, eval_fraction=eval_fraction)


def eval_set_tokens(stats: DatasetStats, padded: bool) -> float:
    """Tokens an ``--eval-dataset`` computes per eval: its packed blocks × seq_len, or its padded examples' tokens.

    The core batches the eval set as it batches the training set (``trainer.train``: the same ``packed``).
    """
    if padded:
        return stats.examples_total * stats.mean_kept_tokens
    return float(stats.blocks_total * stats.seq_len)


def evaluated_workload(
    workload: Workload,
    evaluation: EvalData | None,
    eval_steps: int | None,
    dataset_rows: int | None,
    eval_stats: DatasetStats | None,
) -> Workload:
    """``workload`` with its eval set priced (:func:`autotune.planner.evaluation.with_eval`); unchanged without one.

    ``dataset_rows``: the ``--dataset``'s rows (None: a sequence is a row); ``eval_stats``: the ``--eval-dataset``
    tokenized, batched as ``workload`` is (padded when its batches are).

    Raises:
        InvalidRequestError: the fraction holds out no row or every one.
    """
    if evaluation is None:
        return workload
    padded = isinstance(workload.batches, PaddedBatches)
    eval_tokens = eval_set_tokens(eval_stats, padded) if eval_stats is not None else None
    return with_eval(
        workload, eval_steps=eval_steps, eval_fraction=evaluation.eval_fraction, rows=dataset_rows,
        eval_tokens=eval_tokens,
    )  # fmt: skip


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
    gpu: str, num_gpus: int, num_nodes: int, host_memory_gib: float | None, interconnect: str | None = None
) -> tuple[ClusterSpec, list[str]]:
    """The cluster and notes to show (alias resolution, the network assumed).

    ``interconnect``: ``--interconnect`` (profile names, ``autotune.profiles.interconnects.resolve_network``); the
    GPU's defaults for what it leaves out. The host RAM assumed when ``host_memory_gib`` is None is noted by
    :func:`host_memory_note`, once it is known that a setting offloads.
    """
    gpu_spec, note = resolve_gpu(gpu)
    notes = [note] if note else []
    if host_memory_gib is None:
        host_memory_gib = assumed_host_memory_gib(gpu_spec.memory_gib, max(1, num_gpus))
    network = resolve_network(gpu_spec, interconnect)
    intra = network.intra
    cluster = validated(
        ClusterSpec,
        gpu=gpu_spec,
        num_gpus_per_node=num_gpus,
        num_nodes=num_nodes,
        host_memory_gib_per_node=host_memory_gib,
        inter_node_gb_per_s=network.inter.gb_per_s,
        intra_node_gb_per_s=intra.gb_per_s if intra is not None else None,
        intra_node_bus_measured=intra.measured_bus if intra is not None else False,
        network=network.describe(gpu_spec, num_nodes),
    )
    if cluster.world_size > 1:
        notes.append(cluster.network)
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
    """``[note]`` when ``setting`` offloads to the CPU on a single GPU, whose time rests on one run of the core.

    The core's single-GPU offload runs on an H200 (docs/cost-model.md §7.7,
    ``profiles/measurements/autotune-core-h200``) set the host link's efficiency (LoRA under FSDP offload, within 4 %
    since); full fine-tuning with FSDP offload still took 1.5× the predicted time there (the host's AdamW and the
    micro-step, not refitted on one row).
    """
    if not setting.offloads_to_cpu or cluster.world_size != 1:
        return []
    if setting.method == "full":
        return [
            f"sharding {setting.sharding} on one GPU: full fine-tuning with CPU offload took 1.5× the predicted time "
            "in the core's one such run (an H200; docs/cost-model.md §7.7), so its tokens/s here is likely optimistic"
        ]
    return [
        f"sharding {setting.sharding} on one GPU: the host link's achieved bandwidth (0.34 of its datasheet figure) "
        "comes from one run of the core (Llama-3-8B LoRA on an H200; docs/cost-model.md §7.7): another host may differ"
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


def num_samples_note(num_samples: int | None, seq_len: int, from_dataset: bool) -> str | None:
    """What ``--num-samples N`` assumes: N sequences of ``seq_len`` tokens each (N × seq_len per epoch), or None.

    ``Workload.tokens_per_epoch`` prices every sample as a full ``seq_len`` block (packed data); instruction data is
    mostly shorter, so times and costs scale with the real token count, which ``--dataset`` measures and
    ``--dataset-tokens`` states. None when no ``--num-samples`` was given or a ``--dataset`` gave the samples
    (``from_dataset``: its packed blocks are full by construction).
    """
    if num_samples is None or from_dataset:
        return None
    tokens = num_samples * seq_len
    return (
        f"--num-samples {num_samples:,} is taken as {num_samples:,} × seq_len {seq_len} = {tokens:,} tokens per epoch "
        "(every sample a full block); if your samples are shorter, give --dataset FILE (measured) or --dataset-tokens "
        "N: time and cost scale with the tokens"
    )


def build_request(
    *,
    model: str,
    gpu: str,
    num_gpus: int,
    num_nodes: int,
    host_memory_gib: float | None,
    interconnect: str | None = None,
    seq_len: int,
    global_batch_size: int,
    num_samples: int | None,
    dataset_tokens: int | None,
    epochs: float,
    objective: str,
    overrides: Overrides,
    batches: Batches | None = None,
    coefficients: CostCoefficients | None,
    calibration_name: str,
    global_batch_stated: bool = True,
    evaluation: EvalData | None = None,
    eval_steps: int | None = None,
    dataset_rows: int | None = None,
    eval_stats: DatasetStats | None = None,
) -> tuple[PlanRequest, list[str]]:
    """Validate every planning input and build the request; returns it with notes to show the user.

    ``batches``: a dataset's padded batches or packed blocks (``num_samples`` its sequences; None without a
    dataset). ``evaluation`` / ``eval_steps`` (:func:`eval_data`): the eval set priced in the workload
    (:func:`autotune.planner.evaluation.with_eval`): ``--eval-fraction`` of ``dataset_rows`` (the ``--dataset``'s
    rows; None: a sequence is a row), or ``eval_stats`` (the ``--eval-dataset`` tokenized). ``overrides`` is already
    validated (:meth:`autotune.cli.setting_options.SettingOptions.overrides`); the objective is
    checked by :class:`PlanRequest` (its ``Objective`` type, the one list of objectives).

    Raises:
        AutotuneError: unknown model or GPU, or an invalid value (one line naming the option).
    """
    spec, source = resolve_model(model)
    cluster, notes = resolve_cluster(gpu, num_gpus, num_nodes, host_memory_gib, interconnect)
    notes += shapes_note(spec, source)
    notes += [approximation_note(spec.key, text) for text in spec.approximations]
    workload = validated(
        Workload,
        seq_len=seq_len,
        global_batch_size=global_batch_size,
        num_samples=num_samples,
        dataset_tokens=dataset_tokens,
        epochs=epochs,
    )
    if batches is not None and num_samples is not None:
        workload = workload.with_dataset(num_samples, batches)
    workload = evaluated_workload(workload, evaluation, eval_steps, dataset_rows, eval_stats)
    notes += [note for note in [seq_len_note(spec, seq_len)] if note]
    notes += [note for note in [num_samples_note(num_samples, seq_len, batches is not None)] if note]
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
        global_batch_stated=global_batch_stated,
    )
    return request, notes


def setting_notes(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: Workload,
    setting: TrainingSetting,
    coefficients: CostCoefficients,
    step_time_s: float,
    host_memory_gib: float | None,
    host_settings: Iterable[TrainingSetting],
) -> list[str]:
    """The notes of a chosen or stated setting, one list for ``plan`` and ``estimate``, in this order.

    Host memory (over ``host_settings``, which may add a plan's runner-ups), LoRA dropout, kernels, offload time,
    masked attention (at the setting's ``step_time_s``).
    """
    from autotune.session.attention_note import masked_attention_notes

    notes = host_memory_note(cluster, host_memory_gib, host_settings)
    notes += lora_dropout_notes(model, [setting])
    notes += kernels_notes([setting])
    notes += offload_time_notes(cluster, setting)
    return notes + masked_attention_notes(model, cluster, workload, setting, coefficients, step_time_s)
