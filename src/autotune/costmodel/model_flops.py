"""Model FLOPs: the FLOPs a setting's method needs per micro-step, the numerator of MFU.

MFU = model FLOPs per second / the GPU's peak (Chowdhery et al. 2022, PaLM, appendix B; Narayanan et al. 2021,
§5.1): what the method needs, not what the run does (recomputation and dequantization are hardware FLOPs).
"""

from __future__ import annotations

from autotune.costmodel.context import SettingContext

FULL_FLOPS_PER_WEIGHT = 6
"""Model FLOPs per token per weight that trains: forward 2, input gradient 2, weight gradient 2 (Kaplan et al. 2020,
§2.1; Narayanan et al. 2021, "Megatron-LM on GPU clusters", §5.1; Chowdhery et al. 2022, PaLM, appendix B)."""

FROZEN_FLOPS_PER_WEIGHT = 4
"""Model FLOPs per token per frozen weight (LoRA / QLoRA base): forward 2 + input gradient 2; the weight-gradient
GEMM of :data:`FULL_FLOPS_PER_WEIGHT` is never run for a weight that does not train."""


def model_flops_per_micro_step(context: SettingContext) -> float:
    """Model FLOPs of one micro-step: the FLOPs the method needs, not those the run does, for MFU.

    tokens × (c × N + 12 × layers × heads × head_dim × sequence length), c = 6 when the weights train
    (:data:`FULL_FLOPS_PER_WEIGHT`), 4 for LoRA / QLoRA's frozen base (:data:`FROZEN_FLOPS_PER_WEIGHT`); N = the
    weights a token multiplies by (decoder linears with the active experts, the output projection); the attention
    term is PaLM's (Chowdhery et al. 2022, appendix B: 2 matmuls × 2 FLOPs × 3 for forward + backward, the causal mask
    not subtracted; its input gradients are needed whether the weights train or not). Not counted: recomputation under
    activation checkpointing (that is hardware FLOPs, HFU, not model FLOPs; Korthikanti et al. 2022, §6), QLoRA's
    dequantization, and the adapters' own GEMMs (6 × r × (in + out) per target per token: 0.5 % of N for Llama-3-8B
    at r 16 on all linears).
    """
    model = context.model
    per_weight = FROZEN_FLOPS_PER_WEIGHT if context.setting.uses_adapters else FULL_FLOPS_PER_WEIGHT
    return context.tokens * (
        per_weight * context.counts.matmul_params_per_token
        + 12 * context.layers * model.num_attention_heads * model.head_dim * context.seq_tokens
    )
