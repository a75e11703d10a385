"""Measured rows ready to predict (:class:`Case`), and the one rule for what a row is compared on.

What is compared, per measurement row:
  * memory: the measured peak against the prediction of the same kind (:func:`comparable_memory_gib`) —
    allocated for ``allocated``; reserved, capped at the GPU's memory minus the CUDA context, for ``reserved``
    and ``unknown`` (a caching allocator never reserves more than the card has; it frees cached blocks first);
    reserved + context, capped at the GPU's memory, for ``nvidia-smi``. Only rows of known kind are fitted
    (:func:`memory_of_known_kind`): a number of unknown meaning cannot calibrate what it measures;
  * time (:func:`comparable_time`): one micro-step when the source gives it, else one optimizer step, else the
    whole run's wall time (needs its dataset size); rows with ``unknown_tokens`` are left out of time comparisons.

Every consumer — ``results.evaluate`` (validation), ``time_fit.time_rows`` (the time fit) and the seed-row
tests — asks these functions, so a row is compared on the same quantity everywhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from autotune.costmodel.priors import CUDA_CONTEXT_BYTES
from autotune.errors import ConfigError
from autotune.profiles.catalog import resolve_gpu, resolve_model_profile
from autotune.profiles.measurement_csv import runs_from_csv
from autotune.profiles.measurements import measurement_models
from autotune.schemas.calibration import Measurement
from autotune.schemas.estimate import Estimate
from autotune.schemas.hardware import ClusterSpec
from autotune.schemas.model import ModelSpec
from autotune.units import GIB

TimeKind = Literal["micro-step", "step", "run"]
"""Which measured time a row is compared on: one micro-step, one optimizer step, or the whole run."""

RESERVED_KINDS = ("reserved", "nvidia-smi")
"""Memory kinds whose prediction depends on ``allocator_overhead_fraction`` (:func:`comparable_memory_gib`): the
only rows that identify the allocator's fragmentation."""

CONTEXT_GIB = CUDA_CONTEXT_BYTES / GIB
"""The CUDA context, GiB: outside the allocator's figures, inside nvidia-smi's."""


@dataclass(frozen=True)
class Case:
    """A measurement with its resolved model and cluster, ready to be predicted."""

    measurement: Measurement
    model: ModelSpec
    cluster: ClusterSpec


def prepare_cases(measurements: Iterable[Measurement]) -> list[Case]:
    """Resolve each measurement's model and GPU from the catalog.

    Raises:
        UnknownNameError: a row names a model or GPU that is not in the catalog.
    """
    cases = []
    extra_models = measurement_models()
    for measurement in measurements:
        model = extra_models.get(measurement.model) or resolve_model_profile(measurement.model)
        cases.append(Case(measurement, model, measurement_cluster(measurement)))
    return cases


def measurement_cluster(measurement: Measurement) -> ClusterSpec:
    """The cluster a measurement ran on: its GPU from the catalog, GPUs per node, nodes and network.

    Raises:
        UnknownNameError: the GPU is not in the catalog.
    """
    gpu, _ = resolve_gpu(measurement.gpu)
    network = {"inter_node_gb_per_s": measurement.inter_node_gb_per_s} if measurement.inter_node_gb_per_s else {}
    return ClusterSpec(
        gpu=gpu, num_gpus_per_node=measurement.num_gpus_per_node, num_nodes=measurement.num_nodes, **network
    )


def cases_from_csv(path: str | Path) -> list[Case]:
    """The cases of a calibration CSV: each row with the architecture its ``model`` cell names.

    A catalog name gives the catalog entry; a ``config.json``, model directory or ``.gguf`` gives the shapes read
    from that file (relative paths from the CSV's folder), which :func:`prepare_cases` could not find from
    ``Measurement.model`` alone (:func:`autotune.profiles.measurement_csv.runs_from_csv`).

    Raises:
        ConfigError: see :func:`~autotune.profiles.measurement_csv.runs_from_csv`.
    """
    clusters: dict[tuple[str, int, int, float | None], ClusterSpec] = {}  # a file repeats a few clusters
    cases = []
    for run in runs_from_csv(path):
        m = run.measurement
        key = (m.gpu, m.num_gpus_per_node, m.num_nodes, m.inter_node_gb_per_s)
        cluster = clusters.get(key) or clusters.setdefault(key, measurement_cluster(m))
        cases.append(Case(m, run.model, cluster))
    return cases


def comparable_time(measurement: Measurement) -> tuple[TimeKind, float] | None:
    """The measured time a row is compared on, with its kind, or None when it has none (module docstring).

    A whole run is comparable only when the row states its dataset size (the prediction needs the step count).
    """
    if measurement.unknown_tokens:
        return None
    if measurement.micro_step_time_s is not None:
        return "micro-step", measurement.micro_step_time_s
    if measurement.step_time_s is not None:
        return "step", measurement.step_time_s
    if measurement.run_time_s is not None and measurement.workload.total_samples is not None:
        return "run", measurement.run_time_s
    return None


def predicted_time_of_kind(kind: TimeKind, estimate: Estimate) -> float | None:
    """The estimate's time of ``kind`` (a run: ``total_time_s``, None without a dataset size)."""
    if kind == "micro-step":
        return estimate.micro_step_time_s
    if kind == "step":
        return estimate.step_time_s
    return estimate.total_time_s


def memory_of_known_kind(measurement: Measurement) -> bool:
    """The row states a peak memory of known kind: compared against a defined quantity, and fitted."""
    return measurement.peak_memory_gib is not None and measurement.memory_kind != "unknown"


def comparable_memory_gib(measurement: Measurement, estimate: Estimate) -> float:
    """The predicted memory of the kind the row measured (module docstring), GiB."""
    capacity = estimate.gpu_memory_gib
    if measurement.memory_kind == "allocated":
        return estimate.peak_memory_gib
    if measurement.memory_kind == "nvidia-smi":
        return min(estimate.peak_reserved_gib + CONTEXT_GIB, capacity)
    return min(estimate.peak_reserved_gib, capacity - CONTEXT_GIB)


def check_measured_ranges(cases: Sequence[Case]) -> None:
    """Stage-2 range check of calibration inputs, against each row's GPU.

    Stage 1, absolute ranges, is the :class:`~autotune.schemas.calibration.Measurement` schema. A memory figure read on
    the device — ``allocated`` (``torch.cuda.max_memory_allocated``, every run report), ``reserved`` or ``nvidia-smi`` —
    cannot exceed that GPU's memory (``GpuSpec.memory_gib``). A figure of ``unknown`` kind keeps only the absolute
    range: some published tools report more than the card (seed rows: 26.9 on the 24 GiB RX 7900 XTX, 81 on 80 GiB
    A100s).

    Raises:
        ConfigError: the first row out of range, naming its source, the field and both values.
    """
    for case in cases:
        m, gpu = case.measurement, case.cluster.gpu
        if m.memory_kind == "unknown":
            continue
        for field in ("peak_memory_gib", "weights_memory_gib"):
            value = getattr(m, field)
            if value is not None and value > gpu.memory_gib:
                raise ConfigError(
                    f"{m.source}: {field} {value:g} GiB ({m.memory_kind}) is more than {gpu.key}'s "
                    f"{gpu.memory_gib:g} GiB: not a measurement of one GPU (GiB per GPU expected; nothing was written)"
                )
