"""The eval loss's time: forward-only micro batches over the held-out set, at every eval the trainer schedules.

An eval (transformers ``Trainer.evaluate``: ``model.eval()`` under ``torch.no_grad``, micro batches of
``per_device_eval_batch_size`` = the setting's micro batch, ``trainer.hf_args``) runs each decoder layer's forward
once (no activation-checkpointing recompute, no backward, no optimizer), lm_head and the loss forward. Its time is
priced from the training step's own forward terms, not a constant:

* the layers: ``layer_time.layer_passes``' forward pass (GPU seconds + exposed CPU dispatch, ``step_time.pass_time_s``)
  × layers;
* lm_head + loss: lm_head's forward GEMM (``gemm.linear_pass_time_s``, the device ``head_time.head_gemm_device``
  picks) and the forward half of the logits traffic (``head_time`` counts it twice: forward and backward), plus the
  head's kernels (``HEAD_KERNELS_PER_MICRO_STEP``, which also counts the backward's: an upper bound of a few µs).
  Liger's fused linear cross-entropy runs in training only (its ``lce_forward`` materialises the logits when
  ``self.training`` is false), so the eval head is the unfused one;
* sharded parameters (FSDP / ZeRO-3): the forward all-gathers, root unit + first layer exposed plus, per layer, the
  gather's excess over a layer's forward (``step_time.parameter_gathers_s``; the training forward's rule in
  ``step_time.communication_term``, which counts that excess for every layer);
* CPU offload: every unit's weights copied in once, the forward's copies of the training step
  (``offload.forward_streaming_s``: the first unit exposed, each further one beyond the previous layer's forward);
* the trainer's per-micro-step Python (``micro_step_overhead_s``); all × ``time_scale`` like the training terms.

Not priced: the one-off recompilation of a compiled model in eval mode.
"""

from __future__ import annotations

import math

from autotune.costmodel import activations as act
from autotune.costmodel.context import SettingContext
from autotune.costmodel.device import DeviceContext
from autotune.costmodel.gemm import linear_pass_time_s
from autotune.costmodel.head_time import head_gemm_device
from autotune.costmodel.layer_time import layer_passes
from autotune.costmodel.offload import forward_streaming_s
from autotune.costmodel.priors import GPU_KERNEL_MIN_S, HEAD_KERNELS_PER_MICRO_STEP
from autotune.costmodel.step_time import exposed_dispatch_s, parameter_gathers_s, pass_time_s
from autotune.schemas.calibration import CostCoefficients
from autotune.schemas.workload import EvalSet


def head_forward_s(context: SettingContext, device: DeviceContext, coefficients: CostCoefficients) -> float:
    """lm_head + loss forward of one micro batch, seconds (GPU time + exposed dispatch; module docstring)."""
    model, setting, dtypes, tokens = context.model, context.setting, context.dtypes, context.tokens
    element, head_device, _ = head_gemm_device(context, device)
    gemm_s = linear_pass_time_s(tokens, model.hidden_size, model.vocab_size, element, head_device, "forward")
    logits_s = act.loss_bytes_per_logit(model, setting, dtypes) * tokens * model.vocab_size / device.dram_bytes_per_s
    gpu_s = gemm_s + logits_s + HEAD_KERNELS_PER_MICRO_STEP * GPU_KERNEL_MIN_S
    return gpu_s + exposed_dispatch_s(HEAD_KERNELS_PER_MICRO_STEP * coefficients.kernel_launch_s, gpu_s)


def eval_micro_batch_s(context: SettingContext, coefficients: CostCoefficients, device: DeviceContext) -> float:
    """Seconds of one forward-only micro batch on one rank (one eval batch; module docstring).

    ``device``: the GPU under ``coefficients`` (:func:`~autotune.costmodel.device.device_context`, built once).
    """
    forward, _ = layer_passes(context, device, coefficients)
    gpu_s, exposed_s = pass_time_s(forward, coefficients)
    layer_s = gpu_s + exposed_s
    gathers_s = 0.0
    if context.setting.shards_parameters and context.world_size > 1:
        root_s, gather_s = parameter_gathers_s(context, coefficients)
        gathers_s = root_s + gather_s + context.layers * max(0.0, gather_s - layer_s)
    streaming_s = forward_streaming_s(context, coefficients, layer_s)
    seconds = context.layers * layer_s + head_forward_s(context, device, coefficients) + gathers_s + streaming_s
    return coefficients.time_scale * (seconds + coefficients.micro_step_overhead_s)


def eval_batches_per_rank(eval_samples: int, world_size: int, micro_batch_size: int) -> int:
    """Micro batches one rank evaluates: ⌈⌈eval_samples / world⌉ / micro batch⌉ (the sampler shares them out evenly)."""
    return math.ceil(math.ceil(eval_samples / world_size) / micro_batch_size)


def eval_time_s(
    context: SettingContext,
    coefficients: CostCoefficients,
    optimizer_steps: int,
    device: DeviceContext,
) -> tuple[int, float]:
    """(evals, their seconds) in a run of ``optimizer_steps``; (0, 0.0) when the workload prices no eval.

    Evals: :meth:`autotune.schemas.workload.Workload.num_evals`; each runs
    :func:`eval_batches_per_rank` micro batches of :func:`eval_micro_batch_s` (the held-out sequences priced like
    the training's: ``EvalSet.samples`` counts them in the workload's sequences).
    """
    evals = context.workload.num_evals(optimizer_steps)
    match context.workload.eval:
        case EvalSet(samples=int() as samples) if evals:
            batches = eval_batches_per_rank(samples, context.world_size, context.setting.micro_batch_size)
            return evals, evals * batches * eval_micro_batch_s(context, coefficients, device)
    return 0, 0.0
