"""Collective communication time: per-collective latency plus ring bandwidth, with the frameworks' buckets.

NCCL ring algorithms (Patarasuk & Yuan 2009; nccl-tests doc/PERFORMANCE.md, "bus bandwidth"): an all-gather or
reduce-scatter of B bytes over N ranks moves (N−1)/N·B per rank, an all-reduce 2(N−1)/N·B; each collective
also pays a fixed latency (``CostCoefficients.collective_latency_s``), so many small collectives are
latency-bound. The bus bandwidth per rank (:func:`link_bytes_per_s`): inside a node the GPUs' link
(``ClusterSpec.intra_node_gb_per_s`` from the interconnect profile, else the GPU's NVLink / xGMI or PCIe); across
nodes the node's aggregate NIC bandwidth (``ClusterSpec.inter_node_gb_per_s``: NCCL runs one ring per NIC, so the
rings together use the node's whole network and each rank's share of the ring traffic crosses it once: a node sends
what one rank's bus traffic is), the smaller of the two. A link rate is scaled by the achievable bus efficiency
(``collective_bandwidth_efficiency``); a profile that states an nccl-tests busbw (``intra_node_bus_measured``: PCIe
GeForce boxes without P2P, NCCL through host memory) is taken as it is.

How often each framework communicates (bucket sizes from their defaults):
  * FSDP FULL_SHARD (one unit per decoder layer, ``transformer_auto_wrap_policy``): all-gather each unit in
    forward and again in backward, reduce-scatter its gradients in backward: 3 collectives per layer per
    micro-step (+ the root unit);
  * ZeRO-3: the same per-layer gather / reduce pattern (``stage3_prefetch_bucket_size`` 5e7 and
    ``reduce_bucket_size`` 5e8 elements bound the messages);
  * ZeRO-2: gradient reduce-scatter in ``reduce_bucket_size`` (5e8 elements) buckets every micro-step, and
    all-gather of the updated weights (``allgather_bucket_size`` 5e8) once per step;
  * DDP: gradient all-reduce in 25 MiB buckets (``bucket_cap_mb``) during the backward of the last micro-step
    of each step (``no_sync`` during accumulation).

ZeRO-3 also runs Python hooks around every submodule that owns parameters, in every pass (forward, the
recomputed forward under activation checkpointing, backward), on one GPU as on many: ``zero3_hooks_s``.
"""

from __future__ import annotations

import math

from autotune.costmodel.params import LinearModule
from autotune.schemas.calibration import CostCoefficients
from autotune.schemas.hardware import ClusterSpec
from autotune.schemas.model import ModelSpec
from autotune.units import GB

ROOT_MODULES_WITH_PARAMETERS = 3
"""Submodules with parameters outside the decoder layers: the embedding, the final norm and lm_head (tied or not:
the hooks fire on both modules)."""

DDP_BUCKET_BYTES = 25 * 2**20
"""torch DistributedDataParallel ``bucket_cap_mb`` default (25 MiB)."""

ZERO_BUCKET_ELEMENTS = 500_000_000
"""DeepSpeed ZeRO ``reduce_bucket_size`` / ``allgather_bucket_size`` default (5e8 elements)."""


def intra_node_bytes_per_s(cluster: ClusterSpec, coefficients: CostCoefficients) -> float:
    """Achievable bus bandwidth between the GPUs of one node, bytes/s per rank (module docstring)."""
    gpu = cluster.gpu
    if cluster.intra_node_gb_per_s is not None and cluster.intra_node_bus_measured:
        return cluster.intra_node_gb_per_s * GB
    link_gb_per_s = cluster.intra_node_gb_per_s or gpu.gpu_link_gb_per_s or gpu.host_link_gb_per_s
    return link_gb_per_s * GB * coefficients.collective_bandwidth_efficiency


def inter_node_bytes_per_s(cluster: ClusterSpec, coefficients: CostCoefficients) -> float:
    """Achievable bus bandwidth of the node's network, bytes/s: its aggregate NIC rate × the bus efficiency."""
    return cluster.inter_node_gb_per_s * GB * coefficients.collective_bandwidth_efficiency


def link_bytes_per_s(cluster: ClusterSpec, coefficients: CostCoefficients) -> float:
    """Achievable collective bandwidth per rank, bytes/s: the node's link, and the network's across nodes."""
    intra = intra_node_bytes_per_s(cluster, coefficients)
    if cluster.num_nodes > 1:
        return min(intra, inter_node_bytes_per_s(cluster, coefficients))
    return intra


def collective_time_s(
    kind: str, message_bytes: float, cluster: ClusterSpec, coefficients: CostCoefficients, count: int = 1
) -> float:
    """Seconds for ``count`` collectives of ``message_bytes`` each (the full, unsharded message).

    Args:
        kind: 'all-gather', 'reduce-scatter' or 'all-reduce'.
        message_bytes: bytes of one collective's full, unsharded message.
        cluster: the GPUs and their links.
        coefficients: the calibration (collective latency and bandwidth efficiency).
        count: how many collectives.

    Raises:
        ValueError: an unknown kind.
    """
    ranks = cluster.world_size
    if ranks <= 1 or count <= 0:
        return 0.0
    fraction = (ranks - 1) / ranks
    if kind == "all-reduce":
        fraction *= 2
    elif kind not in ("all-gather", "reduce-scatter"):
        raise ValueError(f"unknown collective {kind!r}")
    latency = coefficients.collective_latency_s * (1 + math.log2(cluster.num_nodes))
    return count * (latency + fraction * message_bytes / link_bytes_per_s(cluster, coefficients))


def bucketed_time_s(
    kind: str, total_bytes: float, bucket_bytes: float, cluster: ClusterSpec, coefficients: CostCoefficients
) -> float:
    """Seconds for ``total_bytes`` sent as ⌈total / bucket⌉ collectives."""
    if total_bytes <= 0:
        return 0.0
    buckets = max(1, math.ceil(total_bytes / bucket_bytes))
    return collective_time_s(kind, total_bytes / buckets, cluster, coefficients, count=buckets)


def zero3_modules_with_parameters(model: ModelSpec, modules: tuple[LinearModule, ...]) -> int:
    """Submodules that own parameters (the ones ZeRO-3's hooks fetch).

    Every linear and norm of every decoder layer, plus ``ROOT_MODULES_WITH_PARAMETERS``. ``modules``: the model's
    linears, as counted once (``SettingContext.linear_modules``).
    """
    per_layer = sum(m.count for m in modules) // model.num_hidden_layers + model.norms_per_layer
    return model.num_hidden_layers * per_layer + ROOT_MODULES_WITH_PARAMETERS


def zero3_hooks_s(
    model: ModelSpec,
    passes: int,
    coefficients: CostCoefficients,
    modules: tuple[LinearModule, ...],
) -> float:
    """Seconds per micro-step of ZeRO-3's per-submodule fetch / release hooks over ``passes`` passes.

    Passes are 2 without activation checkpointing, 3 with it: modules × passes × ``zero3_module_fetch_s``; exposed (the
    hooks block on the gather before the module runs).
    """
    return zero3_modules_with_parameters(model, modules) * passes * coefficients.zero3_module_fetch_s
