"""lm_head and the loss per micro-step: the (T × V × h) GEMMs and the logits / cross-entropy traffic.

lm_head counts forward, input gradient and (when the head trains) weight gradient, in fp32 on CUDA cores when the
head is fp32 without autocast; a chunked loss recomputes the forward. The logits traffic is
``activations.loss_bytes_per_logit`` per logit, forward and backward, at the achievable bandwidth. With Liger's fused
linear cross-entropy (``SettingContext.fused``) both become its chunked GEMMs and traffic
(``fused_kernels.liger_head_work``). ``HEAD_KERNELS_PER_MICRO_STEP`` kernels, each ``GPU_KERNEL_MIN_S``.
"""

from __future__ import annotations

import functools

from autotune.costmodel import activations as act
from autotune.costmodel.context import SettingContext
from autotune.costmodel.device import FP32_SIMT, DeviceContext
from autotune.costmodel.fused_kernels import liger_head_work
from autotune.costmodel.gemm import GemmDevice, linear_pass_time_s
from autotune.costmodel.layer_time import TermWork
from autotune.costmodel.priors import GPU_KERNEL_MIN_S, HEAD_KERNELS_PER_MICRO_STEP


@functools.lru_cache(maxsize=1024)
def head_gemm_s(
    tokens: float, h: int, vocab: int, element: float, device: GemmDevice, chunked: bool, trained: bool
) -> float:
    """lm_head's GEMMs per micro-step, seconds. Cached per shape.

    Forward (twice for the chunked loss), input gradient, and the weight gradient when the head trains.
    """
    seconds = linear_pass_time_s(tokens, h, vocab, element, device, "forward") * (1 + int(chunked))
    seconds += linear_pass_time_s(tokens, h, vocab, element, device, "input-grad")
    if trained:
        seconds += linear_pass_time_s(tokens, h, vocab, element, device, "weight-grad")
    return seconds


def head_gemm_device(context: SettingContext, device: DeviceContext) -> tuple[float, GemmDevice, float]:
    """(bytes per element of lm_head's GEMMs, the GEMM device they run on, bytes per logit).

    fp32 on CUDA cores when the logits are fp32 without autocast, else the compute dtype's tensor cores.
    """
    setting, dtypes = context.setting, context.dtypes
    logit_bytes = act.logits_dtype_bytes(setting, dtypes)
    fp32_head = logit_bytes == 4 and not dtypes.autocast
    head_device = device.matmul[FP32_SIMT if fp32_head else dtypes.compute_dtype]
    return (4 if fp32_head else dtypes.compute_bytes), head_device, logit_bytes


def head_term(context: SettingContext, device: DeviceContext) -> TermWork:
    """lm_head + loss per micro-step: GPU seconds and kernels (module docstring)."""
    model, setting, dtypes, tokens = context.model, context.setting, context.dtypes, context.tokens
    bandwidth = device.dram_bytes_per_s
    head_element, head_device, logit_bytes = head_gemm_device(context, device)
    if context.fused.linear_cross_entropy:
        work = liger_head_work(model, setting, dtypes, tokens, logit_bytes, head_device)
        kernels = HEAD_KERNELS_PER_MICRO_STEP + work.kernels
        return TermWork(work.gemm_s + work.elementwise_bytes / bandwidth + kernels * GPU_KERNEL_MIN_S, kernels)
    head_s = head_gemm_s(
        tokens, model.hidden_size, model.vocab_size, head_element, head_device,
        setting.loss_impl == "chunked", not setting.uses_adapters,
    )  # fmt: skip
    logits_s = act.loss_bytes_per_logit(model, setting, dtypes) * tokens * model.vocab_size * 2 / bandwidth
    return TermWork(head_s + logits_s + HEAD_KERNELS_PER_MICRO_STEP * GPU_KERNEL_MIN_S, HEAD_KERNELS_PER_MICRO_STEP)
