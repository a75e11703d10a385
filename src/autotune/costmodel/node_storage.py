"""Host RAM and disk a cloud node needs for a plan (``resources.memory`` / ``disk_size`` of the SkyPilot task).

Disk (:func:`node_disk_bytes`): the model's 16-bit weights as downloaded, the checkpoints on disk at once, the
dataset, and an allowance for the environment. Host RAM (:func:`node_memory_bytes`): what CPU offload keeps on the
host (the plan's ``host_memory_gib``), and at least the weights ``from_pretrained`` loads through host memory
(``autotune.trainer.model.load_model``: on the CPU in the plan's load dtype; QLoRA places them on the GPU as it
quantizes). DDP loads one copy per process; FSDP loads one, on rank 0 (the launcher sets accelerate's
``fsdp_cpu_ram_efficient_loading``); DeepSpeed ZeRO-3 partitions the model as it is built (``zero.Init``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from autotune.costmodel.params import count_params, lora_params
from autotune.costmodel.precision import dtype_bytes
from autotune.schemas.hardware import GpuSpec
from autotune.schemas.model import ModelSpec
from autotune.schemas.setting import TrainingSetting
from autotune.units import GIB

DOWNLOAD_BYTES_PER_PARAM: Final[float] = 2.0
"""Bytes per parameter of the weights a node downloads: the catalog's families publish 16-bit safetensors."""

CHECKPOINTS_ON_DISK: Final[int] = 3
"""Checkpoints on disk at once: the training core keeps ``SAVE_TOTAL_LIMIT`` = 2 (``autotune.trainer.hf_args``) and
writes the next before the oldest is rotated out (``autotune.trainer.staged_save``)."""

ENVIRONMENT_ALLOWANCE_BYTES: Final[float] = 30.0 * GIB
"""The node's virtual environment, pip and hub caches, logs: a bounded allowance, not a measurement (torch's CUDA
wheels and their NVIDIA libraries install to several GB; 30 GiB leaves room for two versions in pip's cache)."""


@dataclass(frozen=True)
class NodeNeeds:
    """What one node needs besides its GPUs, in GiB."""

    memory_gib: float
    disk_gib: float


def checkpoint_bytes(model: ModelSpec, setting: TrainingSetting, gpu: GpuSpec) -> float:
    """Bytes of one checkpoint: the trained weights (adapters, or the whole model) and their optimizer state.

    Per trainable parameter: the weight in its training dtype plus the optimizer state
    (:func:`autotune.costmodel.precision.dtype_bytes`: AdamW's two moments, 8-bit states, DeepSpeed's fp32 master).
    """
    bytes_per = dtype_bytes(setting, gpu)
    if setting.uses_adapters:
        trainable = lora_params(model, setting.lora_rank, setting.lora_targets)
        weight = bytes_per.adapter_bytes
    else:
        trainable = count_params(model).total_params
        weight = bytes_per.weight_bytes
    return trainable * (weight + bytes_per.optimizer_bytes)


def node_disk_bytes(model: ModelSpec, setting: TrainingSetting, gpu: GpuSpec, dataset_bytes: int) -> float:
    """Disk one node needs: downloaded weights + :data:`CHECKPOINTS_ON_DISK` checkpoints + dataset + allowance."""
    weights = count_params(model).total_params * DOWNLOAD_BYTES_PER_PARAM
    checkpoints = CHECKPOINTS_ON_DISK * checkpoint_bytes(model, setting, gpu)
    return weights + checkpoints + dataset_bytes + ENVIRONMENT_ALLOWANCE_BYTES


def loading_copies(setting: TrainingSetting, gpus_per_node: int) -> int:
    """Whole copies of the weights one node holds in host RAM while loading (see the module docstring)."""
    if setting.method == "qlora":
        return 0
    return gpus_per_node if setting.sharding == "ddp" else 1


def node_memory_bytes(
    model: ModelSpec, setting: TrainingSetting, gpu: GpuSpec, gpus_per_node: int, host_memory_gib: float
) -> float:
    """Host RAM one node needs: CPU offload's ``host_memory_gib`` (GiB), at least the weights loaded through it.

    The weights: :func:`loading_copies` × parameters × the load dtype's bytes
    (:func:`autotune.costmodel.precision.dtype_bytes` ``weight_bytes``).
    """
    loading = loading_copies(setting, gpus_per_node) * count_params(model).total_params
    return max(host_memory_gib * GIB, loading * dtype_bytes(setting, gpu).weight_bytes)


def node_needs(
    model: ModelSpec,
    setting: TrainingSetting,
    gpu: GpuSpec,
    gpus_per_node: int,
    host_memory_gib: float,
    dataset_bytes: int,
) -> NodeNeeds:
    """:func:`node_memory_bytes` and :func:`node_disk_bytes` in GiB."""
    return NodeNeeds(
        memory_gib=node_memory_bytes(model, setting, gpu, gpus_per_node, host_memory_gib) / GIB,
        disk_gib=node_disk_bytes(model, setting, gpu, dataset_bytes) / GIB,
    )
