"""PCIe streaming under CPU offload: the weights streamed in and the gradients streamed out per micro-step.

With FSDP CPU offload (``CPUOffload(offload_params=True)``) and DeepSpeed ZeRO-3 parameter offload the weights live
in pinned host memory and each unit's are copied host→device before that unit runs, in the forward pass and again
in the backward pass (FSDP frees a unit after its forward; ZeRO-3 releases a submodule's parameters after use).
Full fine-tuning also copies each unit's gradients device→host once they are reduced in the backward pass (FSDP
offloads the sharded gradient; ZeRO-Offload keeps gradients and the optimizer on the host). LoRA / QLoRA copy
only the adapters' gradients (their share of the trainable parameters).

**Overlap rule** (:func:`streamed_exposed_s`). A unit's copy runs on a side stream while the previous unit computes:
FSDP prefetches the next unit's all-gather (and with it the host copy) during the current unit's forward and
backward (``BackwardPrefetch.BACKWARD_PRE``, the CPU issuing ahead of the GPU in the forward; Zhao et al. 2023,
"PyTorch FSDP", VLDB, §3.3 / §4.2 "prefetching"; PyTorch FSDP docs, ``backward_prefetch`` / ``forward_prefetch``),
and DeepSpeed ZeRO-3 fetches the next parameters of its traced module order within ``stage3_prefetch_bucket_size``
(default 5e7 elements; Rajbhandari et al. 2021, "ZeRO-Infinity", SC'21, §6.2 "overlap-centric design": the
host→device copy of the next parameters overlaps the current computation). So per pass the exposed copy time is the
first unit's copy (nothing runs before it: the root unit's embedding / output projection, then the first decoder
layer) plus, for every further unit, max(0, copy − the previous unit's compute). Gradients go the other way
(PCIe is full duplex: ``host_link_gb_per_s`` is per direction) and overlap the next unit's backward; a layer's
backward hides max(weights in, gradients out), the excess over the weights' own excess is the gradient term, and
the last unit's gradients (layer 0 and the root unit) are exposed. The per-layer rule also stands for ZeRO-3's
prefetch bucket, which is finer than a layer (a Llama-3-8B layer holds 218 M parameters): evenly spread copies
leave the same excess. One exception: FSDP CPU offload on one GPU copies each unit's gradients synchronously
(:func:`blocks_on_gradient_copies`), so there a layer's backward takes its compute plus its gradient copy, and hides
only the next layer's weights. The bytes move at the host link × ``host_link_efficiency`` (a stated prior, not
fitted; 0.34, from the core's own FSDP-offload run on an H200, where one large pinned copy reaches ~0.8: the schema
field says how).
A consequence the tests check: a micro-step is never shorter than the bytes streamed in / that bandwidth.
"""

from __future__ import annotations

from typing import NamedTuple

from autotune.costmodel.context import SettingContext
from autotune.costmodel.memory import base_weight_bytes
from autotune.costmodel.optimizer_step import host_link_bytes_per_s
from autotune.schemas.calibration import CostCoefficients


class OffloadStreaming(NamedTuple):
    """Exposed host-link seconds of one micro-step under CPU offload, by direction.

    Attributes:
        weights_s: host→device weight copies (forward and backward) not hidden behind compute.
        grads_s: device→host gradient copies not hidden behind the backward (beyond the weights' own excess).
    """

    weights_s: float = 0.0
    grads_s: float = 0.0


def streamed_exposed_s(first_copy_s: float, copy_s: float, compute_s: float, units: int) -> float:
    """Exposed copy seconds of one pass over ``units`` equal units after a first copy (module docstring's rule).

    Args:
        first_copy_s: the copy nothing hides (the pass's first unit), seconds.
        copy_s: one unit's copy, seconds; each but the first hides behind the previous unit's ``compute_s``.
        compute_s: one unit's compute, seconds.
        units: the equal units of the pass after the first.

    Returns:
        ``first_copy_s + units × max(0, copy_s − compute_s)``, seconds.
    """
    return first_copy_s + units * max(0.0, copy_s - compute_s)


class _UnitCopies(NamedTuple):
    """One micro-step's copy seconds per unit under CPU offload (:func:`_unit_copies`)."""

    first_s: float  # the root unit's weights + the first decoder layer's: the copy nothing hides
    weight_layer_s: float  # one decoder layer's weights
    grad_layer_s: float  # one decoder layer's gradients
    root_grad_s: float  # the root unit's gradients (0 for adapters: theirs sit in the layers)


def _unit_copies(context: SettingContext, coefficients: CostCoefficients) -> _UnitCopies:
    """Seconds each unit's weights and gradients take over the achievable host link, on one rank."""
    counts, layers = context.counts, context.layers
    bandwidth = host_link_bytes_per_s(context.gpu, coefficients)
    ranks = context.world_size
    weight_s = base_weight_bytes(context.model, counts, context.setting, context.dtypes) / ranks / bandwidth
    grad_s = context.trainable_params * context.dtypes.grad_bytes / ranks / bandwidth
    layer_share = counts.layer_share
    root_share = counts.root_share
    weight_layer_s, grad_layer_s = weight_s * layer_share, grad_s * layer_share
    if context.setting.uses_adapters:  # the adapters sit in the decoder layers: their gradients are spread over them
        grad_layer_s, root_grad_s = grad_s / layers, 0.0
    else:
        root_grad_s = grad_s * root_share
    return _UnitCopies(weight_s * root_share + weight_layer_s, weight_layer_s, grad_layer_s, root_grad_s)


def forward_streaming_s(context: SettingContext, coefficients: CostCoefficients, layer_fwd_s: float) -> float:
    """Exposed host→device weight-copy seconds of one forward pass under CPU offload; 0 without offload.

    A forward-only pass (an eval batch under ``torch.no_grad``) copies every unit in once, by the overlap rule of the
    module docstring; the training micro-step's forward is the same pass (:func:`offload_streaming`).
    """
    if not context.setting.offloads_to_cpu:
        return 0.0
    copies = _unit_copies(context, coefficients)
    return streamed_exposed_s(copies.first_s, copies.weight_layer_s, layer_fwd_s, context.layers - 1)


def blocks_on_gradient_copies(context: SettingContext) -> bool:
    """Whether each unit's gradient copy to the host stops the backward until it is done (FSDP offload, one GPU).

    FSDP1 runs NO_SHARD at world size 1 (``fsdp/_init_utils.py``), and for NO_SHARD the gradient offload is a
    synchronous copy: ``_runtime_utils._offload_grad`` passes ``non_blocking=handle.uses_sharded_strategy and not
    handle._has_optim_in_backward`` ("Investigate why NO_SHARD breaks correctness when using non_blocking=True").
    The CPU waits in each unit's post-backward hook, so the next unit's backward is issued only after the copy: per
    unit the backward and the gradient copy run one after the other, and the next unit's weight copy (prefetched at
    this unit's pre-backward, the other direction of the link) hides behind both. FULL_SHARD on several GPUs and
    DeepSpeed copy without blocking (the overlap rule of the module docstring).
    """
    return context.setting.sharding == "fsdp-offload" and context.world_size == 1


def offload_streaming(
    context: SettingContext, coefficients: CostCoefficients, layer_fwd_s: float, layer_bwd_s: float
) -> OffloadStreaming:
    """PCIe weight and gradient streaming of one micro-step on one rank; zero without CPU offload.

    Args:
        context: the setting's derived facts (weights per rank: ``base_weight_bytes`` / world size; gradients:
            the trainable parameters × gradient bytes / world size).
        coefficients: ``host_link_efficiency`` (the achievable fraction of ``GpuSpec.host_link_gb_per_s``).
        layer_fwd_s: one decoder layer's forward pass, seconds (GPU time + exposed dispatch).
        layer_bwd_s: one decoder layer's backward pass, seconds; a recomputed forward is added here.

    Returns:
        The exposed seconds per micro-step by direction (:class:`OffloadStreaming`).
    """
    if not context.setting.offloads_to_cpu:
        return OffloadStreaming()
    layers = context.layers
    copies = _unit_copies(context, coefficients)
    first_s, weight_layer_s, grad_layer_s = copies.first_s, copies.weight_layer_s, copies.grad_layer_s
    backward_compute_s = layer_bwd_s + (context.forward_passes - 1) * layer_fwd_s
    forward_s = forward_streaming_s(context, coefficients, layer_fwd_s)
    backward_s = streamed_exposed_s(first_s, weight_layer_s, backward_compute_s, layers - 1)
    if blocks_on_gradient_copies(context):  # a unit's backward + its gradients' copy, the next unit's weights behind
        both_s = (layers - 1) * max(0.0, weight_layer_s - backward_compute_s, grad_layer_s)
    else:
        both_s = (layers - 1) * max(0.0, max(weight_layer_s, grad_layer_s) - backward_compute_s)
    grads_s = both_s - (backward_s - first_s) + grad_layer_s + copies.root_grad_s
    return OffloadStreaming(weights_s=forward_s + backward_s, grads_s=grads_s)
