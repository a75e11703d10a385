"""Hints of a refusal that name a lever: the global batch at which the optimizer in backward fits full fine-tuning.

Kept beside the search (:mod:`autotune.planner.search`), which passes itself in, so that the search module holds the
choice and this one the refusal's advice.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from autotune.errors import AutotuneError
from autotune.planner.request import PlanRequest
from autotune.schemas.setting import TrainingSetting

if TYPE_CHECKING:
    from autotune.planner.search import Scored


def in_backward_hint(
    request: PlanRequest, searched: list[TrainingSetting], best: Callable[[PlanRequest], Scored]
) -> str:
    """A clause naming the largest global batch at which the optimizer in backward fits full fine-tuning, or ''.

    Only when full fine-tuning was searched on one GPU and the user did not turn the lever off: it steps in the
    backward only with one micro-step per optimizer step (``optimizer_in_backward_error``), so at this global batch
    it was tried with the whole batch as one micro batch. The global batch is the user's choice: the planner names
    the one that fits instead of changing it. Tries the powers of two below the global batch; ``searched``: the
    settings the search evaluated, ``best``: the planner's best for a request (raises when nothing fits; the search
    behind it builds no refusal message: each message's own hint would search again, ~64 searches for one refusal).
    """
    o = request.overrides
    full_searched = any(setting.method == "full" for setting in searched)
    if not full_searched or o.optimizer_in_backward is False or request.cluster.world_size != 1:
        return ""
    size = request.workload.global_batch_size // 2
    while size >= 1:
        workload = request.workload.model_copy(update={"global_batch_size": size})
        forced = o.model_copy(
            update={"method": "full", "optimizer_in_backward": True, "micro_batch_size": None, "grad_accum": None}
        )
        try:
            found = best(request.model_copy(update={"workload": workload, "overrides": forced}))
        except AutotuneError:
            size //= 2
            continue
        e = found.estimate
        return (
            f"; full fine-tuning fits with the optimizer stepped inside the backward ({found.setting.short()}: peak "
            f"{e.peak_memory_gib:.1f} GiB, {e.tokens_per_s:,.0f} tokens/s), which needs one micro-step per optimizer "
            f"step: --global-batch-size {size}"
        )
    return ""
