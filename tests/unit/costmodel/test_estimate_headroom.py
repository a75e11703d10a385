"""autotune.costmodel.estimate: the headroom band applied to every memory phase."""

from __future__ import annotations

import pytest

from autotune.costmodel.calibration import default_coefficients
from autotune.costmodel.estimate import estimate_setting
from autotune.costmodel.memory import predict_memory
from autotune.profiles.catalog import resolve_gpu, resolve_model_profile
from autotune.schemas.hardware import ClusterSpec
from autotune.schemas.setting import TrainingSetting
from autotune.schemas.workload import Workload

LLAMA = resolve_model_profile("llama3-8b")


def _cluster(gpu: str, gpus: int = 1, nodes: int = 1) -> ClusterSpec:
    return ClusterSpec(gpu=resolve_gpu(gpu)[0], num_gpus_per_node=gpus, num_nodes=nodes, host_memory_gib_per_node=512)


def test_the_headroom_band_is_applied_to_every_phase_not_only_the_peak() -> None:
    """A compiled full run peaks at the end of its backward (counted gradients, a small modelled part); the start of
    backward, with activations and logits, is lower as a point prediction but not once its band is added."""
    from autotune.costmodel.calibration import error_band
    from autotune.costmodel.estimate import banded_peak_bytes
    from autotune.units import GIB

    phases = {"a": {"activations": 10.0 * GIB, "weights": 50.0 * GIB}, "d": {"gradients": 62.0 * GIB}}
    assert banded_peak_bytes(phases, 0.0) == 62.0 * GIB
    assert banded_peak_bytes(phases, 0.5) == 65.0 * GIB  # phase a: 60 + 0.5 × 10
    assert banded_peak_bytes(phases, 0.1) == 62.0 * GIB

    setting = TrainingSetting(
        method="full", micro_batch_size=1, grad_accum=32, grad_ckpt=False, compile=True, optimizer="adamw-8bit"
    )
    cluster, workload = _cluster("h100"), Workload(seq_len=2048, global_batch_size=32)
    coefficients = default_coefficients()
    estimate = estimate_setting(LLAMA, cluster, workload, setting, coefficients)
    memory = predict_memory(LLAMA, setting, cluster, workload, coefficients)
    assert estimate.peak_phase == "end of compiled backward"
    start = memory.phases_bytes["forward/backward"]
    modelled = start["activations"] + start["logits + loss"]
    band = error_band(coefficients.memory_headroom_band, "full")
    assert band > 0
    need_at_start = (sum(start.values()) + band * modelled) / GIB
    assert estimate.peak_memory_gib + estimate.memory_headroom_gib == pytest.approx(need_at_start, abs=2e-3)
    assert estimate.memory_headroom_gib > band * estimate.memory_breakdown_gib["embedding gradient buffer"]
