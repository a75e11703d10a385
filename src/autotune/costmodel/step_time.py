"""Step time of one setting as a sum of named terms (:class:`TimeTerms`), composed from the per-term functions.

The terms: GEMMs by shape, attention by kernel, element-wise traffic, LoRA adapters, QLoRA dequantization (one decoder
layer's passes: ``layer_time``), lm_head + loss (``head_time``), exposed CPU dispatch, exposed communication, ZeRO-3
hooks, PCIe weight and gradient streaming under CPU offload, the optimizer step and fixed overheads (here). The
setting's derived facts come from
:class:`~autotune.costmodel.context.SettingContext` (the object the memory model reads), the GPU's from
:class:`~autotune.costmodel.device.DeviceContext`. docs/cost-model.md §5 has the formulas, sources and measured error.

* **dispatch** (:func:`exposed_dispatch_s`) — each kernel costs ``kernel_launch_s`` of CPU time (eager PyTorch),
  plus the adapters' Python; a layer pass takes max(GPU time, CPU time), the excess is ``exposed cpu dispatch``.
* **communication** (:func:`communication_term`, ``collectives``) — per layer, overlapped with that layer's compute
  only (FSDP / ZeRO-3 prefetch one unit ahead); FSDP with ``grad_sync`` last-micro-step reduce-scatters in the last
  micro-step of a step only (``no_sync`` on the others); DDP's all-reduce overlaps the last micro-step's backward,
  ZeRO-2's gather follows the step; ZeRO-3's per-submodule hooks (``collectives.zero3_hooks_s``) per pass, exposed.
* **PCIe streaming** (``offload.offload_streaming``) — under CPU offload each layer's weights come in before its
  forward and its backward (and full fine-tuning's gradients go out), each copy hidden only behind the previous
  layer's compute (FSDP / ZeRO-3 prefetch), the first unit of each pass exposed.
* **activation offloading** (``activation_offload``) — the layers' saved activations out to the host in the forward
  and back in the backward, on the compute stream (not hidden).
* **optimizer step** (:func:`optimizer_term`, ``optimizer_step``) — GPU AdamW or CPU Adam; plus
  ``step_overhead_s`` per step and ``micro_step_overhead_s`` per micro-step (trainer Python).
* **stack** — every term is multiplied by ``CostCoefficients.time_scale``: 1 in the shipped fit (the project's own
  core), the user's stack over the core after ``autotune calibrate`` (``calibration/stack_fit.py``), times the local
  correction that calibration learned near its rows (``costmodel/time_correction.py``; none in the shipped fit).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from typing import NamedTuple

from autotune.costmodel.activation_offload import activation_offload_s
from autotune.costmodel.collectives import (
    DDP_BUCKET_BYTES,
    ZERO_BUCKET_ELEMENTS,
    bucketed_time_s,
    collective_time_s,
    zero3_hooks_s,
)
from autotune.costmodel.context import SettingContext, setting_context
from autotune.costmodel.device import DeviceContext, device_context
from autotune.costmodel.head_time import head_term
from autotune.costmodel.layer_time import LayerPass, TermWork, layer_passes
from autotune.costmodel.memory import base_weight_bytes
from autotune.costmodel.model_flops import model_flops_per_micro_step
from autotune.costmodel.offload import offload_streaming
from autotune.costmodel.optimizer_step import optimizer_step_s, trainable_tensors
from autotune.costmodel.time_correction import correction_at
from autotune.schemas.calibration import CostCoefficients
from autotune.schemas.hardware import ClusterSpec
from autotune.schemas.model import ModelSpec
from autotune.schemas.setting import TrainingSetting
from autotune.schemas.workload import Workload


def _term(label: str) -> float:
    """A :class:`TimeTerms` field of 0 s with its label (``TERM_LABELS``)."""
    return field(default=0.0, metadata={"label": label})


@dataclass(frozen=True)
class TimeTerms:
    """Seconds of one optimizer step on one rank, term by term; :meth:`total_s` is the step time.

    Every GPU term includes its kernels' per-kernel GPU cost (``GPU_KERNEL_MIN_S`` each). Each field's label (its
    metadata, ``TERM_LABELS``) names it in ``Estimate.time_breakdown_s``, the table and docs/cost-model.md §5.

    Attributes:
        gemm_s: the decoder layers' ``nn.Linear`` GEMMs by shape (forward, recompute, backward).
        attention_s: the attention kernel (flash or math, ``context.uses_flash_attention``).
        elementwise_s: the layers' non-GEMM kernels (norms, rotary, activation, residual adds, casts, math
            attention's softmax), counted from the module code.
        lora_adapters_s: the LoRA targets' skinny GEMMs and element-wise work (``adapter_time``); parameter
            adapters' merge GEMMs (``param_adapters``).
        qlora_dequant_s: bitsandbytes' dequantization of every NF4 linear per pass (``adapter_time``).
        lm_head_loss_s: the output projection and the logits / cross-entropy traffic.
        exposed_dispatch_s: CPU dispatch time the GPU cannot hide.
        exposed_communication_s: collectives not hidden behind compute (per micro-step and per step).
        zero3_hooks_s: DeepSpeed ZeRO-3's per-module fetch / release hooks.
        pcie_weight_streaming_s: CPU offload's host→device weight copies not hidden behind compute (``offload``).
        pcie_grad_streaming_s: CPU offload's device→host gradient copies not hidden behind the backward.
        optimizer_step_s: the optimizer (GPU AdamW or CPU Adam).
        fixed_overheads_s: the trainer's per-micro-step and per-step Python overheads.
        pcie_optimizer_paging_s: a paged optimizer's states that do not fit beside the reserved peak, moved over the
            host link each step (``optimizer_step.optimizer_paging_s``; :func:`with_optimizer_paging`).
        pcie_activation_offload_s: the layers' saved activations copied to the host in the forward and back in the
            backward, on the compute stream (``activation_offload.activation_offload_s``).
    """

    gemm_s: float = _term("gemm")
    attention_s: float = _term("attention")
    elementwise_s: float = _term("element-wise")
    lora_adapters_s: float = _term("lora adapters")
    qlora_dequant_s: float = _term("qlora dequant")
    lm_head_loss_s: float = _term("lm_head + loss")
    exposed_dispatch_s: float = _term("exposed cpu dispatch")
    exposed_communication_s: float = _term("exposed communication")
    zero3_hooks_s: float = _term("zero-3 module hooks")
    pcie_weight_streaming_s: float = _term("pcie weight streaming")
    pcie_grad_streaming_s: float = _term("pcie gradient streaming")
    optimizer_step_s: float = _term("optimizer step")
    fixed_overheads_s: float = _term("fixed overheads")
    pcie_optimizer_paging_s: float = _term("pcie optimizer paging")
    pcie_activation_offload_s: float = _term("pcie activation offload")

    def seconds(self) -> tuple[float, ...]:
        """The terms' seconds in field order (``TERM_LABELS`` order)."""
        return tuple(vars(self).values())  # a dataclass sets its fields in order: nothing else is stored

    def total_s(self) -> float:
        """The sum of the terms, in field order."""
        return sum(self.seconds())

    def labelled(self) -> dict[str, float]:
        """{label: seconds} in field order."""
        return dict(zip(TERM_LABELS.values(), self.seconds(), strict=True))


TERM_LABELS: dict[str, str] = {f.name: f.metadata["label"] for f in fields(TimeTerms)}
"""Each :class:`TimeTerms` field and its label (derived from the fields)."""


@dataclass(frozen=True)
class TimePrediction:
    """Predicted times in seconds for one GPU rank, with its terms.

    Attributes:
        micro_step_time_s: forward + backward of one micro batch, including exposed communication and offload.
        optimizer_time_s: optimizer step incl. CPU Adam, the step overhead and exposed per-step communication.
        step_time_s: ``grad_accum × micro_step_time_s + optimizer_time_s`` (= ``terms.total_s()``).
        model_flops_per_micro_step: model FLOPs for MFU (:func:`model_flops_per_micro_step`).
        terms: the seconds of one optimizer step, term by term (:class:`TimeTerms`).
    """

    micro_step_time_s: float
    optimizer_time_s: float
    step_time_s: float
    model_flops_per_micro_step: float
    terms: TimeTerms

    @property
    def breakdown_s(self) -> dict[str, float]:
        """The terms by label (``TERM_LABELS``); they add up to ``step_time_s``."""
        return self.terms.labelled()


class Communication(NamedTuple):
    """Exposed collective seconds: per micro-step and per optimizer step."""

    micro_step_s: float = 0.0
    step_s: float = 0.0


def exposed_dispatch_s(cpu_s: float, gpu_s: float) -> float:
    """CPU dispatch seconds the GPU cannot hide: max(0, CPU − GPU)."""
    return max(0.0, cpu_s - gpu_s)


def pass_time_s(one: LayerPass, coefficients: CostCoefficients) -> tuple[float, float]:
    """(GPU seconds, exposed dispatch seconds) of one layer pass: kernels × ``kernel_launch_s`` + its Python."""
    gpu_s = one.gpu_s()
    return gpu_s, exposed_dispatch_s(one.kernels() * coefficients.kernel_launch_s + one.python_cpu_s(), gpu_s)


def gathered_weight_bytes(context: SettingContext) -> float:
    """Bytes of every weight as an all-gather moves them: as stored, or in the compute dtype under autocast."""
    counts, dtypes = context.counts, context.dtypes
    if dtypes.autocast:
        return counts.total_params * dtypes.compute_bytes
    return base_weight_bytes(context.model, counts, context.setting, dtypes)


def parameter_gathers_s(context: SettingContext, coefficients: CostCoefficients) -> tuple[float, float]:
    """(root unit's, one decoder layer's) all-gather seconds when parameters are sharded (FSDP / ZeRO-3).

    A layer's share of the weights is its parameters (attention, MLP, norms) over all
    (:attr:`~autotune.costmodel.params.ParamCounts.layer_share`); the root unit (embedding, final norm, output
    projection) holds the rest.
    """
    counts, cluster = context.counts, context.cluster
    gathered_bytes = gathered_weight_bytes(context)
    layer_share = counts.layer_share
    root_share = counts.root_share
    gather = collective_time_s("all-gather", gathered_bytes * layer_share, cluster, coefficients)
    root = collective_time_s("all-gather", gathered_bytes * root_share, cluster, coefficients)
    return root, gather


def communication_term(
    context: SettingContext, coefficients: CostCoefficients, layer_fwd_s: float, layer_bwd_s: float
) -> Communication:
    """Exposed collectives of a multi-rank setting, layer by layer behind the layer passes (module docstring)."""
    setting, cluster, dtypes, counts, layers = (
        context.setting, context.cluster, context.dtypes, context.counts, context.layers,
    )  # fmt: skip
    if cluster.world_size == 1:
        return Communication()
    gathered_bytes = gathered_weight_bytes(context)
    grad_bytes = context.trainable_params * dtypes.grad_bytes
    if setting.shards_parameters:
        layer_share = counts.layer_share
        root, gather = parameter_gathers_s(context, coefficients)
        scatter = collective_time_s("reduce-scatter", grad_bytes * layer_share, cluster, coefficients)
        backward_compute = layer_bwd_s + (context.forward_passes - 1) * layer_fwd_s
        # grad_sync last-micro-step (FSDP under no_sync): only the last micro-step of a step reduce-scatters.
        synced = 1.0 / setting.grad_accum if setting.uses_fsdp and setting.grad_sync == "last-micro-step" else 1.0
        return Communication(
            micro_step_s=2 * root
            + gather
            + layers * max(0.0, gather - layer_fwd_s)
            + layers * synced * max(0.0, gather + scatter - backward_compute)
            + layers * (1 - synced) * max(0.0, gather - backward_compute)
        )
    if setting.sharding == "zero2":
        zero_bucket = ZERO_BUCKET_ELEMENTS * dtypes.grad_bytes
        scatter_s = bucketed_time_s("reduce-scatter", grad_bytes, zero_bucket, cluster, coefficients)
        return Communication(
            micro_step_s=max(0.0, scatter_s - layers * layer_bwd_s),
            step_s=bucketed_time_s(
                "all-gather", gathered_bytes, ZERO_BUCKET_ELEMENTS * dtypes.weight_bytes, cluster, coefficients
            ),
        )
    if setting.sharding == "ddp":
        reduce_s = bucketed_time_s("all-reduce", grad_bytes, DDP_BUCKET_BYTES, cluster, coefficients)
        last_bucket = collective_time_s("all-reduce", min(grad_bytes, DDP_BUCKET_BYTES), cluster, coefficients)
        return Communication(step_s=max(last_bucket, reduce_s - layers * layer_bwd_s))
    return Communication()


def zero3_hooks_term(context: SettingContext, coefficients: CostCoefficients) -> float:
    """ZeRO-3's fetch / release hooks per micro-step (forward passes + backward); 0 unless DeepSpeed shards weights."""
    setting = context.setting
    if not (setting.uses_deepspeed and setting.shards_parameters):
        return 0.0
    return zero3_hooks_s(context.model, context.forward_passes + 1, coefficients, modules=context.linear_modules)


def optimizer_term(context: SettingContext, coefficients: CostCoefficients) -> float:
    """The optimizer step on one rank over its share of the trainable parameters (``optimizer_step``)."""
    setting, trainable, ranks = context.setting, context.trainable_params, context.world_size
    trainable_per_rank = trainable / ranks if setting.sharding not in ("none", "ddp") else trainable
    tensors = trainable_tensors(context.model, setting, modules=context.linear_modules, lora=context.lora)
    return optimizer_step_s(
        context.model, setting, context.gpu, context.dtypes, trainable_per_rank, coefficients,
        ranks_per_node=context.cluster.num_gpus_per_node, tensors=tensors,
    )  # fmt: skip


def predict_time(
    model: ModelSpec,
    setting: TrainingSetting,
    cluster: ClusterSpec,
    workload: Workload,
    coefficients: CostCoefficients,
) -> TimePrediction:
    """Micro-step, optimizer-step and step times for one rank: :func:`predict_time_in` of its context."""
    context = setting_context(model, setting, cluster, workload)
    return predict_time_in(context, coefficients, device_context(cluster.gpu, coefficients))


def predict_time_in(context: SettingContext, coefficients: CostCoefficients, device: DeviceContext) -> TimePrediction:
    """Micro-step, optimizer-step and step times for one rank, as :class:`TimeTerms` (module docstring).

    ``device``: the GPU under ``coefficients`` (:func:`~autotune.costmodel.device.device_context`, built once).
    """
    layers, forward_passes = context.layers, context.forward_passes
    forward, backward = layer_passes(context, device, coefficients)
    fwd_gpu, fwd_exposed = pass_time_s(forward, coefficients)
    bwd_gpu, bwd_exposed = pass_time_s(backward, coefficients)
    head = head_term(context, device)
    head_exposed = exposed_dispatch_s(head.kernels * coefficients.kernel_launch_s, head.gpu_s)

    def layers_s(fwd: TermWork, bwd: TermWork) -> float:  # every layer's forward passes and backward
        return layers * forward_passes * fwd.gpu_s + layers * bwd.gpu_s

    gemm_s = layers_s(forward.gemm, backward.gemm)
    attention_s = layers_s(forward.attention, backward.attention)
    elementwise_s = layers_s(forward.elementwise, backward.elementwise)
    lora_s = layers_s(forward.lora_adapters, backward.lora_adapters)
    dequant_s = layers_s(forward.qlora_dequant, backward.qlora_dequant)
    dispatch_s = layers * (forward_passes * fwd_exposed + bwd_exposed) + head_exposed
    overhead_s = coefficients.micro_step_overhead_s
    # the compute terms in the order they are summed (fixed overheads before communication: unchanged figures)
    compute_s = gemm_s + attention_s + elementwise_s + lora_s + dequant_s + head.gpu_s + dispatch_s + overhead_s
    communication = communication_term(context, coefficients, fwd_gpu + fwd_exposed, bwd_gpu + bwd_exposed)
    streaming = offload_streaming(context, coefficients, fwd_gpu + fwd_exposed, bwd_gpu + bwd_exposed)
    hooks_s, offload_s = zero3_hooks_term(context, coefficients), activation_offload_s(context, coefficients)
    micro_step_s = compute_s + communication.micro_step_s + streaming.weights_s + streaming.grads_s + hooks_s
    micro_step_s += offload_s  # the layers' saved activations to the host and back (0 without the lever)
    accum, scale = context.setting.grad_accum, coefficients.time_scale  # the calibrated stack (1 in the shipped fit)
    local = correction_at(context, coefficients)  # what the user's rows say near this setting (calibrate)
    scale *= 1.0 if local is None else math.exp(local[0])
    optimizer_s, step_overhead_s = optimizer_term(context, coefficients), coefficients.step_overhead_s
    optimizer_total_s = optimizer_s + communication.step_s + step_overhead_s
    terms = TimeTerms(  # one optimizer step: each micro-step term × grad_accum, plus the per-step terms
        gemm_s=scale * accum * gemm_s,
        attention_s=scale * accum * attention_s,
        elementwise_s=scale * accum * elementwise_s,
        lora_adapters_s=scale * accum * lora_s,
        qlora_dequant_s=scale * accum * dequant_s,
        lm_head_loss_s=scale * accum * head.gpu_s,
        exposed_dispatch_s=scale * accum * dispatch_s,
        exposed_communication_s=scale * (accum * communication.micro_step_s + communication.step_s),
        zero3_hooks_s=scale * accum * hooks_s,
        pcie_weight_streaming_s=scale * accum * streaming.weights_s,
        pcie_grad_streaming_s=scale * accum * streaming.grads_s,
        optimizer_step_s=scale * optimizer_s,
        fixed_overheads_s=scale * (accum * overhead_s + step_overhead_s),
        pcie_activation_offload_s=scale * accum * offload_s,
    )
    return TimePrediction(
        micro_step_time_s=scale * micro_step_s,
        optimizer_time_s=scale * optimizer_total_s,
        step_time_s=scale * (accum * micro_step_s + optimizer_total_s),
        model_flops_per_micro_step=model_flops_per_micro_step(context),
        terms=terms,
    )


def with_optimizer_paging(timing: TimePrediction, paging_s: float) -> TimePrediction:
    """``timing`` with a paged optimizer's host-link traffic added to the optimizer step (``pcie_optimizer_paging_s``).

    Separate from :func:`predict_time_in` because the traffic depends on the memory prediction (what the reserved
    peak leaves of the card); not scaled by ``time_scale`` (the calibrated stack factor is the core's compute, this is
    the link's time). Unchanged when ``paging_s`` is 0.
    """
    if not paging_s:
        return timing
    terms = replace(timing.terms, pcie_optimizer_paging_s=paging_s)
    return replace(
        timing,
        optimizer_time_s=timing.optimizer_time_s + paging_s,
        step_time_s=timing.step_time_s + paging_s,
        terms=terms,
    )
