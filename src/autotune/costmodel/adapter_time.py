"""The work LoRA adapters and QLoRA dequantization add to one decoder layer's pass, counted from the code that runs.

**LoRA** (peft ``lora.Linear.forward``, peft 0.21): per adapted ``nn.Linear`` of ``in`` → ``out`` features, on
``T`` tokens whose input x is in the compute dtype (``c`` bytes) and adapters of ``a`` bytes
(``DtypeBytes.adapter_bytes``)::

    result = base_layer(x)                        # the base GEMM (counted with the layer)
    x = x.to(lora_A.weight.dtype)                 # cast, only when a != c            in·(c + a)
    h = dropout(x)                                # only when p > 0: out + bool mask  in·(a + a + 1)
    y = lora_B(lora_A(h)) * scaling               # two skinny GEMMs; scale            out·(a + a)
    result = result + y                           # add (type promotion to max(a, c)) out·(c + a + max)
    result = result.to(torch_result_dtype)        # only when a != c                  out·(max + c)

Backward, in reverse: the result cast's and the add's gradient casts (only when a != c, out·(c + max) each), the
scale (out·2a), four GEMMs (input and weight gradient of B and A), the dropout's mask multiply (in·(2a + 1), p > 0),
the input cast's gradient (in·(a + c), a != c) and the accumulation of x's gradient from the base and the adapter
branch (in·3c). Kernels: one per listed element-wise op, one per GEMM. The skinny GEMMs run at their own shape
efficiency (``gemm.linear_pass_time_s``: M = T, N or K = rank) in fp32 on CUDA cores for fp32 adapters (peft casts x
to fp32; PyTorch leaves TF32 off for matmuls by default) or in the compute dtype on tensor cores.

**QLoRA** (bitsandbytes ``Linear4bit`` → ``MatMul4Bit``, 0.50): every forward of a quantized linear, and its
backward's input gradient, first dequantizes the whole NF4 weight — read 0.5 byte per parameter plus its absmax
(``units.nf4_bytes_per_param``), write the compute-dtype copy (the base GEMM then reads it) — in one kernel, plus one
for the absmax with double quantization (``dequantize_blockwise`` of the 8-bit absmax). Passes: forward, the
recompute under checkpointing, and backward.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from autotune.costmodel.gemm import GemmDevice, linear_pass_time_s
from autotune.costmodel.params import LoraLayout
from autotune.units import nf4_bytes_per_param


@dataclass(frozen=True)
class AdapterOps:
    """Element-wise bytes per token per input / output feature and kernels of one LoRA target, for one pass."""

    bytes_per_in_feature: float
    bytes_per_out_feature: float
    kernels: int


@functools.lru_cache(maxsize=64)
def lora_ops(adapter_bytes: float, compute_bytes: float, dropout: bool) -> tuple[AdapterOps, AdapterOps]:
    """(forward, backward) element-wise work of one peft LoRA target (module docstring), GEMMs excluded."""
    a, c = adapter_bytes, compute_bytes
    cast = a != c
    wide = max(a, c)
    forward = AdapterOps(
        bytes_per_in_feature=(c + a) * cast + (2 * a + 1) * dropout,
        bytes_per_out_feature=2 * a + (c + a + wide) + (wide + c) * cast,
        kernels=int(cast) + int(dropout) + 2 + 2 + int(cast),
    )
    backward = AdapterOps(
        bytes_per_in_feature=(2 * a + 1) * dropout + (a + c) * cast + 3 * c,
        bytes_per_out_feature=2 * (c + wide) * cast + 2 * a,
        kernels=2 * int(cast) + 1 + 4 + int(dropout) + int(cast) + 1,
    )
    return forward, backward


@functools.lru_cache(maxsize=4096)
def lora_gemm_s(
    layers: int,
    lora: LoraLayout,
    rank: int,
    tokens: float,
    element_bytes: float,
    device: GemmDevice,
) -> tuple[float, float]:
    """(forward, backward) seconds of one layer's LoRA GEMMs.

    Per module-wrapped target (``LoraLayout.module_targets``) x·Aᵀ (T × in → r) and
    ·Bᵀ (T × r → out) forward; their input and weight gradients backward; ``layers``: the model's decoder layers.
    Cached: candidates repeat the same shapes.
    """
    forward = backward = 0.0
    for m in lora.module_targets:
        per_layer = m.count // layers
        pairs = ((m.in_features, rank), (rank, m.out_features))
        forward += per_layer * sum(linear_pass_time_s(tokens, i, o, element_bytes, device, "forward") for i, o in pairs)
        backward += per_layer * sum(
            linear_pass_time_s(tokens, i, o, element_bytes, device, kind)
            for i, o in pairs
            for kind in ("input-grad", "weight-grad")
        )
    return forward, backward


@functools.lru_cache(maxsize=4096)
def lora_elementwise(layers: int, lora: LoraLayout, ops: AdapterOps, tokens: float) -> tuple[float, int]:
    """(bytes, kernels) of one layer's LoRA element-wise work in one pass of ``tokens`` tokens (cached).

    Over the module-wrapped targets (``LoraLayout.module_targets``) of a model of ``layers`` decoder layers.
    """
    moved = 0.0
    kernels = 0
    for m in lora.module_targets:
        per_layer = m.count // layers
        moved += (
            per_layer * tokens * (ops.bytes_per_in_feature * m.in_features + ops.bytes_per_out_feature * m.out_features)
        )
        kernels += per_layer * ops.kernels
    return moved, kernels


@functools.lru_cache(maxsize=1024)
def targets_per_layer(layers: int, lora: LoraLayout) -> float:
    """Module-wrapped adapted linears (``LoraLayout.module_targets``) per one of ``layers`` decoder layers (cached)."""
    return sum(m.count for m in lora.module_targets) / layers


def dequant_per_layer_pass(
    decoder_linear_params: int, linears: int, layers: int, double_quant: bool, compute_bytes: float
) -> tuple[float, float]:
    """(bytes, kernels) of one layer's QLoRA dequantization in one pass (forward, recompute or backward).

    Every quantized weight is read as NF4 + absmax and written in the compute dtype; one kernel per linear, two with
    double quantization (module docstring).
    """
    moved = decoder_linear_params / layers * (nf4_bytes_per_param(double_quant) + compute_bytes)
    return moved, linears / layers * (1 + int(double_quant))
