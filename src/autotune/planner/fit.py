"""Why a predicted setting does not fit, in one line with the numbers (used when ``--set`` breaks a plan)."""

from __future__ import annotations

from autotune.schemas.estimate import Estimate


def fit_shortfall(prediction: Estimate) -> str:
    """What does not fit: the GPU need (:attr:`Estimate.gpu_memory_need_gib`) over GPU memory, else host RAM.

    The GPU need is the same sum the planner compares (peak allocated + CUDA context + headroom), so
    ``launch`` and ``plan`` print the same need for the same setting.
    """
    need_gib = prediction.gpu_memory_need_gib
    if need_gib > prediction.gpu_memory_gib:
        return (
            f"peak {prediction.peak_memory_gib:.1f} GiB + context {prediction.cuda_context_gib:.1f} + headroom "
            f"{prediction.memory_headroom_gib:.1f} = {need_gib:.1f} GiB > {prediction.gpu_memory_gib:.1f} GiB "
            "per GPU (the run may go out of memory)"
        )
    return f"CPU offload needs {prediction.host_memory_gib:.1f} GiB of host RAM per node, more than the plan's node has"
