"""Activation offloading in the cost model: the layers' saved sets leave the GPU peak and cross the host link."""

from __future__ import annotations

import pytest

from autotune.costmodel.activation_offload import activation_offload_s, offloaded_activations
from autotune.costmodel.context import setting_context
from autotune.costmodel.memory import predict_memory
from autotune.costmodel.optimizer_step import host_link_bytes_per_s
from autotune.costmodel.step_time import predict_time
from autotune.profiles.catalog import resolve_gpu, resolve_model_profile
from autotune.schemas.calibration import CostCoefficients
from autotune.schemas.hardware import ClusterSpec
from autotune.schemas.setting import TrainingSetting
from autotune.schemas.workload import Workload

WORKLOAD = Workload(seq_len=2048, global_batch_size=2)


def _cluster() -> ClusterSpec:
    gpu, _ = resolve_gpu("rtx-4090")
    return ClusterSpec(gpu=gpu, host_memory_gib_per_node=64)


def _settings() -> tuple[TrainingSetting, TrainingSetting]:
    plain = TrainingSetting(method="full", micro_batch_size=2, grad_ckpt=False, loss_impl="chunked")
    return plain, plain.model_copy(update={"activation_offloading": True})


def test_offloaded_activations_leave_the_peak_and_sit_on_the_host() -> None:
    """Start of backward: the plain run holds every layer's saved set; the offloaded one holds none of them."""
    model, cluster, coefficients = resolve_model_profile("llama3-8b"), _cluster(), CostCoefficients()
    plain, offloaded = _settings()
    before = predict_memory(model, plain, cluster, WORKLOAD, coefficients)
    after = predict_memory(model, offloaded, cluster, WORKLOAD, coefficients)
    moved = offloaded_activations(setting_context(model, offloaded, cluster, WORKLOAD), peak=True)
    start = "forward/backward"
    freed = before.phases_bytes[start]["activations"] - after.phases_bytes[start]["activations"]
    assert freed == pytest.approx(moved.gpu_freed_bytes)
    assert moved.gpu_freed_bytes > 0.9 * before.phases_bytes[start]["activations"]  # the layers' sets are the bulk
    assert after.host_bytes_per_node == pytest.approx(moved.moved_bytes)
    assert before.host_bytes_per_node == 0
    late = "late backward"  # one layer's set is back beside its working set
    back = after.phases_bytes[late]["activations"] - before.phases_bytes[late]["activations"]
    assert back == pytest.approx(moved.layer_bytes)


def test_offload_time_is_both_directions_over_the_host_link() -> None:
    """2 × moved bytes / the pinned host link per micro-step, as the step's 'pcie activation offload' term."""
    model, cluster, coefficients = resolve_model_profile("llama3-8b"), _cluster(), CostCoefficients()
    plain, offloaded = _settings()
    context = setting_context(model, offloaded, cluster, WORKLOAD)
    moved = offloaded_activations(context, peak=False).moved_bytes
    expected = 2 * moved / host_link_bytes_per_s(cluster.gpu, coefficients)
    assert activation_offload_s(context, coefficients) == pytest.approx(expected)
    slow = predict_time(model, offloaded, cluster, WORKLOAD, coefficients)
    fast = predict_time(model, plain, cluster, WORKLOAD, coefficients)
    assert slow.breakdown_s["pcie activation offload"] == pytest.approx(expected * offloaded.grad_accum)
    assert slow.step_time_s == pytest.approx(fast.step_time_s + expected)
    assert fast.breakdown_s["pcie activation offload"] == 0


def test_nothing_is_offloaded_without_the_lever() -> None:
    model, cluster = resolve_model_profile("llama3-8b"), _cluster()
    plain, _ = _settings()
    assert offloaded_activations(setting_context(model, plain, cluster, WORKLOAD), peak=True).moved_bytes == 0
