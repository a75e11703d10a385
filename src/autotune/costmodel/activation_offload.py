"""Activation offloading to host memory (``activation_offloading``): what leaves the GPU peak, what crosses the link.

The core (:mod:`autotune.trainer.activation_offload`) hooks the tensors each decoder layer saves for its backward
(``torch.autograd.graph.saved_tensors_hooks``, the pattern of torch's ``save_on_cpu(pin_memory=True)``: a pinned host
copy made in the forward, copied back with ``non_blocking`` in the backward; torchtune's ``OffloadActivations`` rule:
parameters and tensors under 1 KiB stay on the GPU). So:

* memory — every layer's saved set (``activations.layer_activation_bytes_per_token`` × tokens, each layer's copy of
  a materialised attention mask, an MoE's merged weights) leaves the GPU once the layer's forward is done; during a
  layer's backward its set is back, one layer at a time (a bound from above: autograd frees each unpacked tensor
  once its node has run). The embedding output, the final norm's and the loss's tensors stay (they are saved outside
  the layers). The host holds every layer's set, pinned (``MemoryPrediction.host_bytes_per_node``).
* time — the copies are queued on the compute stream (``save_on_cpu``'s ``copy_`` and ``.to(..., non_blocking)`` run
  on the current stream), so they do not overlap the layers' kernels: per micro-step the saved sets go out in the
  forward and come back in the backward, 2 × bytes / the achievable pinned host-link bandwidth
  (``optimizer_step.host_link_bytes_per_s``, the link figure of CPU offload and optimizer paging). torchtune's
  version overlaps the copies on a second stream and would hide part of it: a bound from above.
"""

from __future__ import annotations

from dataclasses import dataclass

from autotune.costmodel import activations as act
from autotune.costmodel.context import SettingContext
from autotune.costmodel.optimizer_step import host_link_bytes_per_s
from autotune.costmodel.param_adapters import merged_weight_bytes_per_layer
from autotune.schemas.calibration import CostCoefficients


@dataclass(frozen=True)
class OffloadedActivations:
    """Bytes the offload moves for one micro batch (module docstring).

    Attributes:
        layer_bytes: one decoder layer's saved set (with its copy of the attention mask): what comes back for its
            backward.
        gpu_freed_bytes: what leaves the GPU at the end of the forward (every layer's set; the shared mask once).
        moved_bytes: what crosses the link each way, and what the host holds (every layer's set with its mask).
    """

    layer_bytes: float
    gpu_freed_bytes: float
    moved_bytes: float


NOTHING_OFFLOADED = OffloadedActivations(0.0, 0.0, 0.0)


def offloaded_activations(context: SettingContext, *, peak: bool) -> OffloadedActivations:
    """What the offload moves for ``context``'s micro batch; nothing without ``activation_offloading``.

    ``peak``: sized for the longest micro batch (memory: ``peak_tokens``) or the mean one (time: ``tokens``).
    """
    setting = context.setting
    if not setting.activation_offloading:
        return NOTHING_OFFLOADED
    model, dtypes = context.model, context.dtypes
    seq_tokens, tokens = context.seq_tokens, context.tokens
    if peak:
        seq_tokens, tokens = context.peak_seq_tokens, context.peak_tokens
    masked, flash = context.masked_attention, context.flash_attention
    layer = act.layer_activation_bytes_per_token(
        model, setting, dtypes, seq_tokens, flash, context.fused, lora=context.lora, masked_attention=masked
    )
    mask = act.mask_bytes(model, setting.micro_batch_size, seq_tokens, flash, dtypes.residual_bytes, masked)
    merged = merged_weight_bytes_per_layer(model, setting, dtypes, context.lora)
    saved = layer.total * tokens + merged
    layers = context.layers
    return OffloadedActivations(
        layer_bytes=saved + mask, gpu_freed_bytes=layers * saved + mask, moved_bytes=layers * (saved + mask)
    )


def activation_offload_s(context: SettingContext, coefficients: CostCoefficients) -> float:
    """Seconds per micro-step of the offload's copies: out in the forward, back in the backward (module docstring)."""
    moved = offloaded_activations(context, peak=False).moved_bytes
    return 2 * moved / host_link_bytes_per_s(context.gpu, coefficients) if moved else 0.0
