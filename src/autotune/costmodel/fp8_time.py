"""FP8 linear layers in time: the decoder's ``nn.Linear`` GEMMs at the FP8 rate, plus the casts that feed them.

torchao's float8 training (dynamic tensorwise scaling, what the core runs through accelerate) states when a float8
linear is faster: ``bf16_gemm_time > fp8_gemm_time + fp8_overhead_time`` (pytorch/ao ``torchao/float8/README.md``,
"Derivation", read at 9519bebb): the GEMM gain grows with M, K, N towards 2×, the casts cost memory traffic on every
shape, so small shapes get slower (its H100 microbenchmark: M, K, N = 1024, 2048, 1024 runs at 0.80×; 4096, 8192,
16384 at 1.39×; README at 0cf1281a, "Performance") and large ones faster (Llama3-8B on 8× H100, sequence 8192,
torchtitan + compile: +25.03 % tokens/s tensorwise, +10.05 % rowwise; README at 9519bebb, "Training benchmarks").

So one linear's pass in FP8 is its GEMM by shape (``gemm.linear_pass_time_s``, 1-byte operands) at
:data:`FP8_GEMM_SPEEDUP` × the bf16 rate, plus :data:`FP8_CAST_BYTES_PER_ELEMENT` of DRAM traffic for each operand of
each of its GEMMs (forward: input and weight; input gradient: output gradient and weight; weight gradient: output
gradient and input). The term is the decoder layers' ``gemm`` term of an ``fp8`` setting (``layer_time.gemm_term``);
the first and last linears (embedding, lm_head) stay in bf16, as the core runs them.

Evidence: public figures (torchao / torchtitan), not measured by our core: ``costmodel.evidence`` labels an FP8
setting's time 'public' and widens its band by :data:`FP8_BAND_WIDENING`.
"""

from __future__ import annotations

import functools
from dataclasses import replace

from autotune.costmodel.gemm import GemmDevice, linear_pass_time_s
from autotune.costmodel.params import LinearModule, layer_linear_tokens

FP8_TENSOR_RATE_RATIO = 2.0
"""Dense FP8 over dense bf16 tensor-core FLOP/s on the cards with FP8 (``schemas.setting.FP8_GENERATIONS``): H100 SXM
1979 / 989 TFLOPS, L40S 733 / 362 (their profiles' sources), RTX 4090 330.3 / 165.2 with FP32 accumulate (Ada
whitepaper, appendix A)."""

FP8_GEMM_SPEEDUP = 1.8
"""The FP8 GEMM's achieved rate over the bf16 GEMM's (fitted; a bounded debt: 1 < it ≤ :data:`FP8_TENSOR_RATE_RATIO`).
With :data:`FP8_CAST_BYTES_PER_ELEMENT` and our GEMM model on the H100 (``gemm.gemm_time_s``) a linear's forward and
backward run 1.42× at torchao's large microbenchmark shape (4096 × 8192 × 16384: 1.39× measured) and 0.72× at its
small one (1024 × 2048 × 1024: 0.80×); at 2.0 the large shape would run faster still. Until our core measures FP8,
this is the one constant of the term."""

FP8_CAST_BYTES_PER_ELEMENT = 5.0
"""DRAM bytes per element to give a GEMM an FP8 operand with dynamic tensorwise scaling: the amax pass reads the bf16
tensor (2 B), the scale-and-cast pass reads it again (2 B) and writes the FP8 copy (1 B) (torchao
``float8/float8_scaling_utils.py`` ``hp_tensor_to_float8_dynamic``: ``tensor_to_amax`` then ``to_fp8_no_autograd``)."""

FP8_PUBLIC_GENERATIONS: tuple[str, ...] = ("hopper",)
"""Generations with public FP8 training figures of torchao's float8 recipe on NVIDIA cards (its README's H100 table).
On the other FP8 cards (Ada, Blackwell) the term is the same physics, extrapolated: labelled so, and planned only when
asked (``--fp8``)."""

FP8_BAND_WIDENING = 0.15
"""The band added to an FP8 setting's time: the spread of the public end-to-end gains for the same 8B run (torchao
README at 9519bebb: +25.03 % tensorwise, +10.05 % rowwise on H100; +14.68 % tensorwise on MI300X): 15 points."""

FP8_PUBLIC_E2E_SPEEDUP = 1.25
"""The best public end-to-end FP8 gain at 8B scale (tensorwise, 8× H100: 7689.5 / 6150 tokens/s, torchao README at
9519bebb): an FP8 setting's MFU cap is the generation's bf16 cap × this (``evidence.with_evidence``)."""


def fp8_device(device: GemmDevice) -> GemmDevice:
    """The bf16 GEMM device with its FLOP/s × :data:`FP8_GEMM_SPEEDUP` (same SMs and DRAM)."""
    return replace(device, flops_per_s=device.flops_per_s * FP8_GEMM_SPEEDUP)


def cast_s(elements: float, device: GemmDevice) -> float:
    """Seconds to cast ``elements`` bf16 elements to FP8 with dynamic scaling (:data:`FP8_CAST_BYTES_PER_ELEMENT`)."""
    return elements * FP8_CAST_BYTES_PER_ELEMENT / device.bytes_per_s


def fp8_linear_s(
    tokens: float, in_features: int, out_features: int, device: GemmDevice, trainable: bool
) -> tuple[float, float]:
    """(forward, backward) seconds of one FP8 linear: its GEMMs at the FP8 rate plus each operand's cast.

    ``tokens``: M; ``device``: the bf16 GEMM device (:func:`fp8_device` scales it); ``trainable``: the weight gradient
    GEMM runs (full fine-tuning).
    """
    fast = fp8_device(device)
    shape = (tokens, in_features, out_features, 1.0, fast)
    x, w, dy = tokens * in_features, in_features * out_features, tokens * out_features
    forward = linear_pass_time_s(*shape, "forward") + cast_s(x + w, device)
    backward = linear_pass_time_s(*shape, "input-grad") + cast_s(dy + w, device)
    if trainable:
        backward += linear_pass_time_s(*shape, "weight-grad") + cast_s(dy + x, device)
    return forward, backward


@functools.lru_cache(maxsize=1024)
def fp8_layer_gemm_s(
    modules: tuple[LinearModule, ...],
    layers: int,
    experts: tuple[int, int],
    tokens: float,
    device: GemmDevice,
    trainable: bool,
) -> tuple[float, float]:
    """(forward, backward) seconds of one decoder layer's linears in FP8 (``layer_time.layer_gemm_s``'s arguments)."""
    forward = backward = 0.0
    for m, per_layer, m_tokens in layer_linear_tokens(modules, layers, experts, tokens):
        fwd, bwd = fp8_linear_s(m_tokens, m.in_features, m.out_features, device, trainable)
        forward += per_layer * fwd
        backward += per_layer * bwd
    return forward, backward
