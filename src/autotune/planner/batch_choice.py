"""The global batch the planner chooses when the user stated none and nothing fits at the default.

Some levers run one micro-step per optimizer step only: the optimizer stepped inside the backward
(``optimizer_in_backward_error``) and FSDP CPU offload on one GPU (``offload_accumulation_error``). With them the
whole per-GPU batch is one micro batch, so at the default global batch (32 sequences) they need 32 sequences of
activations at once and full fine-tuning of an 8B model on a 24 GB card does not fit, although it fits at a small
batch: torchtune's single-device full fine-tune runs ``batch_size: 2``, ``gradient_accumulation_steps: 1``,
``optimizer_in_bwd: True`` (pytorch/torchtune ``recipes/configs/llama3_1/8B_full_single_device.yaml``, read at
02d70355). The global batch is a training choice (it sets the gradient noise and the steps per epoch), so the planner
takes it over only where the user left it unstated (``PlanRequest.global_batch_stated``) and nothing fits at the
default, and the plan says so in one note (:func:`batch_note`). One rule: :func:`plan_smaller_batch`, called by
``planner.search.search`` and nowhere else.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from pydantic import ValidationError

from autotune.errors import AutotuneError
from autotune.planner.request import PlanRequest
from autotune.schemas.estimate import Estimate

if TYPE_CHECKING:
    from autotune.planner.search import PlanResult


def smaller_global_batches(request: PlanRequest) -> list[int]:
    """The global batches tried below the request's, largest first: halvings that stay a multiple of the GPUs.

    Powers of two of the default (32 → 16, 8, 4, 2, 1 on one GPU), as the hint of a refusal names them
    (``planner.lever_hints``).
    """
    world = request.cluster.world_size
    sizes = []
    size = request.workload.global_batch_size // 2
    while size >= world:
        if size % world == 0:
            sizes.append(size)
        size //= 2
    return sizes


def keeps_headroom_reserved(estimate: Estimate) -> bool:
    """Whether the allocator's reserved peak also leaves the headroom: reserved + CUDA context + headroom ≤ the card.

    A global batch the user did not ask for must not put the run at the edge of the card: ``fits`` keeps the headroom
    (the 90th percentile of past under-prediction, ``costmodel.estimate.memory_fit``) on the allocated peak, and the
    caching allocator holds more than that (``peak_reserved_gib``); at the edge, an under-prediction as large as the
    headroom makes the allocator free its cache and retry each step (``search.without_allocator_retries``) or run out
    of memory. So the chosen batch keeps the same headroom on what the allocator reserves.
    """
    need_gib = estimate.peak_reserved_gib + estimate.cuda_context_gib + estimate.memory_headroom_gib
    return need_gib <= estimate.gpu_memory_gib


def plan_smaller_batch(
    request: PlanRequest, search: Callable[[PlanRequest], PlanResult], default_shortfall: str
) -> PlanResult | None:
    """The plan at the largest smaller global batch whose chosen setting keeps the headroom on its reserved peak.

    Only for a request whose global batch the user did not state; None when it was stated or no smaller batch
    qualifies. ``search``: the planner's search (passed in: this module sits below it); ``default_shortfall``: why
    nothing fits at the request's global batch, for the note. The result carries the workload it planned and the note.
    """
    if request.global_batch_stated:
        return None
    for size in smaller_global_batches(request):
        workload = request.workload.model_copy(update={"global_batch_size": size})
        try:
            smaller = PlanRequest.model_validate({**dict(request), "workload": workload, "global_batch_stated": True})
            result = search(smaller)
        except (AutotuneError, ValidationError):
            continue  # nothing fits at this batch, or a forced micro batch / accumulation does not divide it
        if keeps_headroom_reserved(result.best.estimate):
            note = batch_note(request, result, default_shortfall)
            return replace(result, workload=workload, notes=(note, *result.notes))
    return None


def batch_note(request: PlanRequest, result: PlanResult, default_shortfall: str) -> str:
    """The one note of a chosen global batch: what was chosen, why, and how to keep the default."""
    default = request.workload.global_batch_size
    setting = result.best.setting
    size = setting.sequences_per_step(request.cluster.world_size)
    one_step = ""
    if setting.grad_accum == 1 and setting.optimizer_in_backward:
        one_step = (
            " (the optimizer stepped inside the backward, which makes it fit, runs one micro-step per optimizer step, "
            "so the whole batch is one micro batch; torchtune's single-device full fine-tune runs batch 2 the same way)"
        )
    return (
        f"global batch {size}: you gave no --global-batch-size and nothing fits at the default {default} "
        f"({default_shortfall}); {size} is the largest smaller power of two at which a setting fits with its reserved "
        f"memory inside the card less the headroom{one_step}. --global-batch-size {default} keeps the default (a "
        "stated global batch is never changed)"
    )
