"""Decoder-model architecture (one YAML per model in ``profiles/models``, or read from config.json).

Field names follow Hugging Face ``config.json``. The parameter count is not stored: it is derived
from these shapes by ``autotune.costmodel.params`` so that it cannot disagree with them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from autotune.schemas._base import FrozenModel


class ModelSpec(FrozenModel):
    """Shapes of a decoder-only transformer (Llama / Mistral / Qwen2 / Gemma / Gemma2 / Phi3 family).

    Legend used across the cost model: h = hidden_size, I = intermediate_size, L = num_hidden_layers,
    n_q = num_attention_heads, n_kv = num_key_value_heads, d = head_dim, V = vocab_size.
    """

    key: str = Field(description="Catalog key or a name derived from the config path.")
    hf_repo_id: str | None = Field(default=None, description="Hugging Face repo id, if there is one.")
    model_type: str = Field(description="config.json model_type, e.g. 'llama', 'gemma2', 'qwen2'.")
    hidden_size: int = Field(gt=0)
    intermediate_size: int = Field(gt=0)
    num_hidden_layers: int = Field(gt=0)
    num_attention_heads: int = Field(gt=0)
    num_key_value_heads: int = Field(gt=0)
    head_dim: int = Field(gt=0)
    vocab_size: int = Field(gt=0)
    tie_word_embeddings: bool = False
    max_position_embeddings: int = Field(gt=0)
    attention_bias: bool = Field(default=False, description="Biases on q/k/v projections (Qwen2).")
    o_proj_bias: bool = Field(
        default=False,
        description="Bias on the attention output projection (Llama/Gemma attention_bias=true; Phi, Falcon).",
    )
    mlp_gated: bool = Field(default=True, description="Gated MLP (SwiGLU/GeGLU: gate, up, down).")
    mlp_bias: bool = False
    fused_qkv: bool = Field(default=False, description="q/k/v stored as one qkv_proj module (Phi-3).")
    fused_gate_up: bool = Field(default=False, description="gate/up stored as one gate_up_proj module (Phi-3).")
    hidden_act: str = "silu"
    norms_per_layer: int = Field(default=2, ge=0, description="RMSNorm/LayerNorm weights per block.")
    norm_has_bias: bool = Field(default=False, description="LayerNorm with bias (2h params per norm).")
    residual_dropout: float = Field(
        default=0.0,
        ge=0.0,
        lt=1.0,
        description="Dropout on the attention and MLP outputs before each residual add (Phi resid_pdrop, GPT-NeoX / "
        "Falcon / BLOOM hidden_dropout, MPT resid_pdrop); above 0 each saves a 1-byte mask per element in training.",
    )
    norm_type: Literal["rmsnorm", "layernorm", "low_precision_layernorm"] = Field(
        default="rmsnorm",
        description="RMSNorm (Llama family) or LayerNorm (GPT-NeoX, Falcon, Phi-2, BLOOM, StableLM, MPT); "
        "low_precision_layernorm is llm-foundry's LPLayerNorm (LayerNorm in the autocast dtype; describes "
        "llm-foundry runs: transformers' MPT builds nn.LayerNorm).",
    )
    num_experts: int = Field(default=1, ge=1, description="MoE experts per MLP (1 = dense).")
    num_experts_per_token: int = Field(default=1, ge=1, description="Experts each token is routed to.")
    final_logit_softcapping: float | None = Field(
        default=None, description="Gemma 2 tanh soft-cap on logits (extra logits-sized temporaries)."
    )
    sliding_window: int | None = Field(
        default=None,
        gt=0,
        description="Sliding-window attention span in tokens (None = full causal). At or beyond it transformers "
        "materialises the attention mask (SDPA then repeats k/v per query head).",
    )
    attn_logit_softcapping: float | None = Field(
        default=None, description="Gemma 2 tanh soft-cap on attention scores (eager attention saves the tanh output)."
    )
    decoder_layer_class: str = Field(
        default="LlamaDecoderLayer",
        description="transformers class of one decoder block (FSDP auto-wrap policy).",
    )
    params_published: str | None = Field(default=None, description="The publisher's size figure.")
    approximations: tuple[str, ...] = Field(
        default=(), description="What the generic counting approximates for this architecture."
    )
    source: str = Field(description="config.json URL or repo:path@commit the shapes come from.")
    notes: str = ""

    @model_validator(mode="after")
    def _check_heads(self) -> ModelSpec:
        if self.num_attention_heads % self.num_key_value_heads != 0:
            raise ValueError(
                f"num_attention_heads ({self.num_attention_heads}) must be a multiple of "
                f"num_key_value_heads ({self.num_key_value_heads})"
            )
        if self.num_experts_per_token > self.num_experts:
            raise ValueError("num_experts_per_token cannot exceed num_experts")
        return self

    @property
    def q_dim(self) -> int:
        """Width of the query projection output, n_q * d (≠ h for Gemma 7B)."""
        return self.num_attention_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        """Width of each of the key and value projection outputs, n_kv * d."""
        return self.num_key_value_heads * self.head_dim
