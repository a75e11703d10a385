"""Why a predicted setting does not fit, in one line with the numbers, and the nearest setting that does.

The line is used when ``--set`` breaks a plan; the nearest setting is used by ``autotune estimate`` of one that does not
fit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from autotune.schemas.estimate import Estimate

if TYPE_CHECKING:
    from autotune.planner.request import PlanRequest
    from autotune.planner.search import Scored


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


def nearest_fitting(request: PlanRequest, keep: dict[str, object]) -> Scored | None:
    """The best setting that fits for ``request`` with the choices in ``keep`` forced; None when nothing fits.

    When none fits with them, the best with nothing forced. Used by ``autotune estimate`` of a setting that does not
    fit.

    ``keep`` holds :class:`~autotune.planner.request.Overrides` fields (e.g. ``{"method": "lora"}``).
    """
    from autotune.errors import AutotuneError
    from autotune.planner.request import Overrides
    from autotune.planner.search import search

    for forced in (keep, {}):
        try:
            return search(request.model_copy(update={"overrides": Overrides(**forced)})).best
        except AutotuneError:
            continue
    return None
