"""A stand-in for bitsandbytes' ``Linear4bit`` that stores and allocates what bitsandbytes does, on fake tensors.

bitsandbytes' CUDA kernels cannot run on fake CPU tensors, so the QLoRA trace swaps every quantized
linear layer for :class:`TracedLinear4bit`, a subclass of ``bnb.nn.Linear4bit`` (so that peft wraps
it with its own ``lora.bnb.Linear4bit``, exactly as in a real QLoRA run) whose forward allocates the
same tensors as bitsandbytes 0.50.2 on CUDA. Sources (``bitsandbytes`` 0.50.2, installed package):

* Storage — ``functional.quantize_4bit`` (``functional.py`` l. 917–958): the packed weight holds
  ``(n + 1) // 2`` bytes (two 4-bit codes per byte) in ``quant_storage`` elements (uint8 by default;
  transformers' ``bnb_4bit_quant_storage``); absmax is one fp32 per 64-element block; with double
  quantization (``compress_statistics``) the absmax is stored as uint8 codes, plus ``state2``: one fp32
  absmax per 256 blocks and a 256-entry fp32 code book, and an fp32 scalar offset; the NF4 code book is
  16 fp32 values.
* Forward — ``autograd._functions.MatMul4Bit.forward`` → ``bitsandbytes::gemm_4bit`` (``backends/cuda/ops.py``
  l. 934–980): beyond 1536 tokens (and on Hopper for most shapes below) it takes
  ``_dequant_linear_fallback`` (l. 904–916): the nested absmax is dequantized into an fp32 buffer and the
  offset added (a second fp32 buffer), the weight is dequantized into an (N, K) tensor in the input dtype,
  then ``F.linear``. The trace always takes this path (the fused small-M kernel allocates less; the
  difference is one transient weight matrix). Only the packed weight is saved for backward.
* Backward — ``MatMul4Bit.backward`` (l. 364–388): ``F.dequantize_4bit`` (``functional.py`` l. 1043–1068)
  dequantizes the nested absmax (fp32, then ``+= offset`` in place) and the weight into an (N, K) tensor in
  the quantization dtype, then ``grad_A = grad_output @ W``.
* Module — ``nn.Linear4bit.forward`` (``nn/modules.py``): the input is cast to ``compute_dtype``, the
  result back to the input dtype.
"""

from __future__ import annotations

from typing import Any

import bitsandbytes as bnb
import torch
import torch.nn.functional as F

NF4_BLOCK_SIZE = 64
"""Elements per absmax block of the 4-bit weight (``quantize_4bit``'s default blocksize)."""
ABSMAX_BLOCK_SIZE = 256
"""Blocks per second-level absmax under double quantization (``quantize_blockwise(blocksize=256)``)."""


def _blocks(numel: int, block: int) -> int:
    return -(-numel // block)


class QuantStateTensors:
    """The fake tensors bitsandbytes' ``QuantState`` holds for one (N, K) weight."""

    def __init__(self, out_features: int, in_features: int, double_quant: bool, dtype: torch.dtype) -> None:
        """Allocate the fake state tensors of an (N, K) weight (N = ``out_features``); ``double_quant`` nests them."""
        numel = out_features * in_features
        blocks = _blocks(numel, NF4_BLOCK_SIZE)
        self.shape = (out_features, in_features)
        self.dtype = dtype
        self.nested = double_quant
        self.code = torch.empty(16, dtype=torch.float32)
        if double_quant:
            self.absmax = torch.empty(blocks, dtype=torch.uint8)
            self.state2_absmax = torch.empty(_blocks(blocks, ABSMAX_BLOCK_SIZE), dtype=torch.float32)
            self.state2_code = torch.empty(256, dtype=torch.float32)
            self.offset = torch.empty((), dtype=torch.float32)
            self.tensors = [self.code, self.absmax, self.state2_absmax, self.state2_code, self.offset]
        else:
            self.absmax = torch.empty(blocks, dtype=torch.float32)
            self.tensors = [self.code, self.absmax]

    def dequantized_absmax(self) -> torch.Tensor:
        """The fp32 absmax that dequantization allocates (nested: dequantize, then add the offset)."""
        if not self.nested:
            return self.absmax
        restored = torch.empty(self.absmax.shape, dtype=torch.float32)
        return restored + self.offset


def packed_weight(out_features: int, in_features: int, storage_dtype: torch.dtype) -> torch.Tensor:
    """The packed NF4 weight as ``quantize_4bit`` stores it: ((n + 1) // (2 · itemsize), 1) elements."""
    numel = out_features * in_features
    per_element = 2 * torch.empty((), dtype=storage_dtype).element_size()
    return torch.empty(((numel + 1) // per_element, 1), dtype=storage_dtype)


class _MatMul4BitTrace(torch.autograd.Function):
    """``MatMul4Bit`` with bitsandbytes' allocations (dequantize-then-matmul), on fake tensors."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None, state: Any) -> torch.Tensor:
        absmax = state.dequantized_absmax()
        weight = torch.empty(state.shape, dtype=x.dtype)
        del absmax
        out = F.linear(x, weight, bias)
        ctx.state = state
        ctx.save_for_backward(packed)
        return out

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> Any:
        state = ctx.state
        absmax = state.dequantized_absmax()
        weight = torch.empty(state.shape, dtype=state.dtype).to(grad_output.dtype)
        del absmax
        grad_x = torch.matmul(grad_output, weight) if ctx.needs_input_grad[0] else None
        return grad_x, None, None, None


class TracedLinear4bit(bnb.nn.Linear4bit):
    """``bnb.nn.Linear4bit`` whose forward allocates as bitsandbytes does, on fake tensors (see module doc).

    ``attach_fake_storage`` replaces the (meta) ``Params4bit`` with the packed fake weight and creates the
    quantization-state tensors; call it inside the ``FakeTensorMode``.
    """

    trace_state: QuantStateTensors

    def attach_fake_storage(self, double_quant: bool, storage_dtype: torch.dtype, quant_dtype: torch.dtype) -> None:
        """Give the layer its fake packed weight and quantization constants (inside FakeTensorMode)."""
        self.trace_state = QuantStateTensors(self.out_features, self.in_features, double_quant, quant_dtype)
        weight = packed_weight(self.out_features, self.in_features, storage_dtype)
        self._parameters["weight"] = torch.nn.Parameter(weight, requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``Linear4bit.forward``: cast to compute dtype, 4-bit matmul, cast back."""
        input_dtype = x.dtype
        compute_dtype = self.compute_dtype or x.dtype
        x = x.to(compute_dtype)
        bias = None if self.bias is None else self.bias.to(compute_dtype)
        out: torch.Tensor = _MatMul4BitTrace.apply(x, self.weight, bias, self.trace_state)
        return out.to(input_dtype)


def quantize_linear_layers(
    model: torch.nn.Module, compute_dtype: torch.dtype, double_quant: bool, storage_dtype: torch.dtype
) -> list[str]:
    """Swap every ``nn.Linear`` except the output head for a meta :class:`TracedLinear4bit`; returns the names swapped.

    As transformers' bitsandbytes integration does (``replace_with_bnb_linear``; the head and its tied embedding stay
    unquantized, ``get_keys_to_not_convert``).
    """
    inner: Any = model
    head = inner.get_output_embeddings() if hasattr(inner, "get_output_embeddings") else None
    swapped = []
    for name, module in list(model.named_modules()):
        for child_name, child in list(module.named_children()):
            if type(child) is not torch.nn.Linear or child is head:
                continue
            with torch.device("meta"):
                layer = TracedLinear4bit(
                    child.in_features,
                    child.out_features,
                    bias=child.bias is not None,
                    compute_dtype=compute_dtype,
                    compress_statistics=double_quant,
                    quant_type="nf4",
                    quant_storage=storage_dtype,
                    device="meta",
                )
            layer.requires_grad_(False)
            setattr(module, child_name, layer)
            swapped.append(f"{name}.{child_name}" if name else child_name)
    return swapped
