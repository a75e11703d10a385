"""Model families: a parsed config's keys → :class:`~autotune.schemas.ModelSpec` fields, one function each.

Used by both readers: :mod:`autotune.profiles.hf_config` (``config.json``) and
:mod:`autotune.profiles.gguf_reader` (GGUF metadata mapped onto the same keys).

Exact families (``model_type``): llama, mistral, qwen2, gemma, gemma2, phi3. Their module layouts
follow transformers' ``modeling_<type>.py`` and missing optional keys take the default of the
transformers config class of that family (e.g. ``GemmaConfig.head_dim = 256``,
``MistralConfig.num_key_value_heads = 8``, ``tie_word_embeddings`` true for Gemma/Gemma 2 and false
for the others), so ``autotune.costmodel.params.count_params`` matches
``sum(p.numel() for p in AutoModelForCausalLM.from_config(config).parameters())``.

Generic families: mixtral, falcon, gpt_neox, stablelm, phi (1/1.5/2), bloom, qwen (v1, remote code), mpt.
They are mapped onto ModelSpec's fields (non-gated MLP, LayerNorm with bias, fused qkv, MoE, ...);
what ModelSpec cannot express is named in ``ModelSpec.approximations``. Any other ``model_type``
with the standard keys (hidden_size, num_hidden_layers, num_attention_heads, vocab_size,
intermediate_size) is read as a Llama-style block, with a note saying so. For the fixture configs
in tests/fixtures/configs the generic counts are within :data:`GENERIC_COUNT_REL_TOLERANCE`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from autotune.errors import ConfigError

GENERIC_COUNT_REL_TOLERANCE: Final[float] = 1e-3
"""Stated bound on |our count − transformers' count| / transformers' count for the generic families
(the terms left out are named in ``approximations``: lm_head bias, embedding LayerNorm, q/k norms)."""

EXACT_MODEL_TYPES: Final[tuple[str, ...]] = ("llama", "mistral", "qwen2", "gemma", "gemma2", "phi3")


class ConfigView:
    """Typed access to one parsed config (config.json, or GGUF metadata mapped onto its keys).

    Every problem becomes a one-line ConfigError naming ``path``.
    """

    def __init__(self, raw: dict[str, Any], path: Path) -> None:
        """Wrap the parsed config ``raw`` read from ``path`` (named in every error)."""
        self.raw = raw
        self.path = path

    def _error(self, problem: str) -> ConfigError:
        return ConfigError(f"{self.path}: {problem}")

    def has(self, key: str) -> bool:
        """True when ``key`` is present and not null."""
        return self.raw.get(key) is not None

    def req_int(self, *keys: str) -> int:
        """The first present key of ``keys`` as a positive int (aliases, e.g. n_layer)."""
        for key in keys:
            if key in self.raw and self.raw[key] is not None:
                return self._positive(key, self.raw[key])
        raise self._error(f"missing required key {' / '.join(repr(k) for k in keys)}")

    def opt_int(self, key: str, default: int) -> int:
        """The value of ``key`` as a positive int, or ``default`` when it is absent or null."""
        value = self.raw.get(key)
        return default if value is None else self._positive(key, value)

    def _positive(self, key: str, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._error(f"key {key!r} must be an integer, got {value!r}")
        if value <= 0:
            raise self._error(f"key {key!r} must be positive, got {value}")
        return value

    def opt_bool(self, key: str, default: bool) -> bool:
        """The value of ``key`` as a bool, or ``default`` when it is absent or null."""
        value = self.raw.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self._error(f"key {key!r} must be true or false, got {value!r}")
        return value

    def opt_str(self, key: str, default: str) -> str:
        """The value of ``key`` when it is a string, else ``default``."""
        value = self.raw.get(key)
        return value if isinstance(value, str) else default

    def opt_float(self, key: str, default: float | None) -> float | None:
        """The value of ``key`` as a float or None (null), or ``default`` when the key is absent."""
        if key not in self.raw:
            return default
        value = self.raw[key]
        if value is None or (isinstance(value, int | float) and not isinstance(value, bool)):
            return None if value is None else float(value)
        raise self._error(f"key {key!r} must be a number or null, got {value!r}")


def _llama_like(
    cfg: ConfigView, *, kv_default: int | None = None, head_dim_default: int | None = None
) -> dict[str, Any]:
    """Shared keys of the Llama-style families; absent n_kv/head_dim use the family class default."""
    hidden = cfg.req_int("hidden_size")
    heads = cfg.req_int("num_attention_heads")
    kv_heads = cfg.opt_int("num_key_value_heads", kv_default or heads)
    if cfg.raw.get("num_key_value_heads", 0) is None:  # explicit null: transformers uses n_q
        kv_heads = heads
    return {
        "hidden_size": hidden,
        "intermediate_size": cfg.req_int("intermediate_size"),
        "num_hidden_layers": cfg.req_int("num_hidden_layers"),
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": cfg.opt_int("head_dim", head_dim_default or hidden // heads),
        "vocab_size": cfg.req_int("vocab_size"),
        "hidden_act": cfg.opt_str("hidden_act", "silu"),
    }


def _llama(cfg: ConfigView) -> dict[str, Any]:
    biased = cfg.opt_bool("attention_bias", False)  # modeling_llama.py: on q, k, v and o
    return _llama_like(cfg) | {
        "tie_word_embeddings": cfg.opt_bool("tie_word_embeddings", False),
        "max_position_embeddings": cfg.opt_int("max_position_embeddings", 2048),
        "attention_bias": biased,
        "o_proj_bias": biased,
        "mlp_bias": cfg.opt_bool("mlp_bias", False),
        "decoder_layer_class": "LlamaDecoderLayer",
    }


def _mistral(cfg: ConfigView) -> dict[str, Any]:
    return _llama_like(cfg, kv_default=8) | {  # modeling_mistral.py: no biases at all
        "tie_word_embeddings": cfg.opt_bool("tie_word_embeddings", False),
        "max_position_embeddings": cfg.opt_int("max_position_embeddings", 4096 * 32),
        "decoder_layer_class": "MistralDecoderLayer",
    }


def _qwen2(cfg: ConfigView) -> dict[str, Any]:
    return _llama_like(cfg, kv_default=32) | {  # modeling_qwen2.py: bias=True on q/k/v only
        "tie_word_embeddings": cfg.opt_bool("tie_word_embeddings", False),
        "max_position_embeddings": cfg.opt_int("max_position_embeddings", 32768),
        "attention_bias": True,
        "decoder_layer_class": "Qwen2DecoderLayer",
    }


def _gemma(cfg: ConfigView) -> dict[str, Any]:
    biased = cfg.opt_bool("attention_bias", False)
    act = cfg.opt_str("hidden_act", "gelu_pytorch_tanh")
    return _llama_like(cfg, kv_default=16, head_dim_default=256) | {
        "tie_word_embeddings": cfg.opt_bool("tie_word_embeddings", True),
        "max_position_embeddings": cfg.opt_int("max_position_embeddings", 8192),
        "attention_bias": biased,
        "o_proj_bias": biased,
        "hidden_act": "gelu_pytorch_tanh" if act == "gelu" else act,  # GemmaConfig.__post_init__
        "decoder_layer_class": "GemmaDecoderLayer",
    }


def _gemma2(cfg: ConfigView) -> dict[str, Any]:
    biased = cfg.opt_bool("attention_bias", False)
    return _llama_like(cfg, kv_default=4, head_dim_default=256) | {
        "tie_word_embeddings": cfg.opt_bool("tie_word_embeddings", True),
        "max_position_embeddings": cfg.opt_int("max_position_embeddings", 8192),
        "attention_bias": biased,
        "o_proj_bias": biased,
        "hidden_act": cfg.opt_str("hidden_activation", "gelu_pytorch_tanh"),
        "norms_per_layer": 4,  # input, post-attention, pre- and post-feedforward RMSNorm
        "final_logit_softcapping": cfg.opt_float("final_logit_softcapping", 30.0),
        "attn_logit_softcapping": cfg.opt_float("attn_logit_softcapping", 50.0),
        "decoder_layer_class": "Gemma2DecoderLayer",
    }


def _phi3(cfg: ConfigView) -> dict[str, Any]:
    return _llama_like(cfg) | {  # modeling_phi3.py: fused qkv_proj and gate_up_proj, no biases
        "tie_word_embeddings": cfg.opt_bool("tie_word_embeddings", False),
        "max_position_embeddings": cfg.opt_int("max_position_embeddings", 4096),
        "fused_qkv": True,
        "fused_gate_up": True,
        "decoder_layer_class": "Phi3DecoderLayer",
    }


def _mixtral(cfg: ConfigView) -> dict[str, Any]:
    return _llama_like(cfg, kv_default=8) | {
        "tie_word_embeddings": cfg.opt_bool("tie_word_embeddings", False),
        "max_position_embeddings": cfg.opt_int("max_position_embeddings", 4096 * 32),
        "num_experts": cfg.opt_int("num_local_experts", 8),
        "num_experts_per_token": cfg.opt_int("num_experts_per_tok", 2),
        "decoder_layer_class": "MixtralDecoderLayer",
        "approximations": [
            "mixtral MoE: all experts held in memory; per-token compute assumes each token uses "
            "num_experts_per_tok experts (router load balance and capacity effects not modelled)"
        ],
    }


def _layernorm_block(cfg: ConfigView, hidden: int, heads: int) -> dict[str, Any]:
    """Fields shared by the LayerNorm families: d = h / n_q, LayerNorm with bias."""
    return {
        "hidden_size": hidden,
        "num_attention_heads": heads,
        "head_dim": hidden // heads,
        "vocab_size": cfg.req_int("vocab_size"),
        "norm_has_bias": True,
        "norm_type": "layernorm",
    }


def _falcon(cfg: ConfigView) -> dict[str, Any]:
    hidden = cfg.req_int("hidden_size", "n_embed")
    heads = cfg.req_int("num_attention_heads", "n_head")
    new_arch = cfg.opt_bool("new_decoder_architecture", False)
    parallel = cfg.opt_bool("parallel_attn", True)
    if new_arch:  # modeling_falcon.py: (2·n_kv + n_q)·d wide query_key_value
        kv_heads = cfg.opt_int("num_kv_heads", cfg.opt_int("n_head_kv", heads))
    else:  # multi_query: h + 2·d; otherwise 3·h
        kv_heads = 1 if cfg.opt_bool("multi_query", True) else heads
    num_ln = cfg.opt_int("num_ln_in_parallel_attn", 2 if new_arch else 1)
    bias = cfg.opt_bool("bias", False)
    notes = []
    if parallel:
        notes.append("falcon: attention and MLP run in parallel on one input; activations modelled as sequential")
    if cfg.opt_bool("alibi", False):
        notes.append("falcon: ALiBi attention bias (no position parameters) modelled like RoPE attention")
    return _layernorm_block(cfg, hidden, heads) | {
        "num_hidden_layers": cfg.req_int("num_hidden_layers", "n_layer"),
        "num_key_value_heads": kv_heads,
        "intermediate_size": cfg.opt_int("ffn_hidden_size", 4 * hidden),
        "tie_word_embeddings": cfg.opt_bool("tie_word_embeddings", True),
        "max_position_embeddings": cfg.opt_int("max_position_embeddings", 2048),
        "attention_bias": bias,
        "o_proj_bias": bias,
        "mlp_bias": bias,
        "mlp_gated": False,
        "fused_qkv": True,
        "hidden_act": cfg.opt_str("activation", "gelu"),
        "residual_dropout": cfg.opt_float("hidden_dropout", 0.0),
        "norms_per_layer": 2 if not parallel or num_ln == 2 else 1,
        "decoder_layer_class": "FalconDecoderLayer",
        "approximations": notes,
    }


def _gpt_neox(cfg: ConfigView) -> dict[str, Any]:
    bias = cfg.opt_bool("attention_bias", True)
    parallel = cfg.opt_bool("use_parallel_residual", True)
    return _layernorm_block(cfg, cfg.req_int("hidden_size"), cfg.req_int("num_attention_heads")) | {
        "num_hidden_layers": cfg.req_int("num_hidden_layers"),
        "num_key_value_heads": cfg.req_int("num_attention_heads"),
        "intermediate_size": cfg.req_int("intermediate_size"),
        "tie_word_embeddings": cfg.opt_bool("tie_word_embeddings", False),
        "max_position_embeddings": cfg.opt_int("max_position_embeddings", 2048),
        "attention_bias": bias,
        "o_proj_bias": bias,
        "mlp_bias": True,  # dense_h_to_4h / dense_4h_to_h always have biases
        "mlp_gated": False,
        "fused_qkv": True,
        "hidden_act": cfg.opt_str("hidden_act", "gelu"),
        "residual_dropout": cfg.opt_float("hidden_dropout", 0.0),
        "decoder_layer_class": "GPTNeoXLayer",
        "approximations": ["gpt_neox: parallel residual (attention ∥ MLP) modelled as sequential"] if parallel else [],
    }


def _stablelm(cfg: ConfigView) -> dict[str, Any]:
    heads = cfg.req_int("num_attention_heads")
    parallel = cfg.opt_bool("use_parallel_residual", False)
    notes = []
    if cfg.opt_bool("qk_layernorm", False):
        notes.append("stablelm qk_layernorm: per-head q/k LayerNorm weights (n_q·d + n_kv·d per layer) not counted")
    if parallel:
        notes.append("stablelm: parallel residual (attention ∥ MLP) modelled as sequential")
    return _layernorm_block(cfg, cfg.req_int("hidden_size"), heads) | {
        "num_hidden_layers": cfg.req_int("num_hidden_layers"),
        "num_key_value_heads": cfg.opt_int("num_key_value_heads", 32),
        "intermediate_size": cfg.req_int("intermediate_size"),
        "tie_word_embeddings": cfg.opt_bool("tie_word_embeddings", False),
        "max_position_embeddings": cfg.opt_int("max_position_embeddings", 4096),
        "attention_bias": cfg.opt_bool("use_qkv_bias", False),
        "hidden_act": cfg.opt_str("hidden_act", "silu"),
        "norms_per_layer": 1 if parallel else 2,
        "decoder_layer_class": "StableLmDecoderLayer",
        "approximations": notes,
    }


def _phi(cfg: ConfigView) -> dict[str, Any]:
    heads = cfg.req_int("num_attention_heads")
    vocab = cfg.req_int("vocab_size")
    notes = [
        f"phi: lm_head bias ({vocab} params) not counted",
        "phi: attention and MLP run in parallel on one input; activations modelled as sequential",
    ]
    if cfg.opt_bool("qk_layernorm", False):
        notes.append("phi qk_layernorm: q/k LayerNorm weights (4·d per layer) not counted")
    return _layernorm_block(cfg, cfg.req_int("hidden_size"), heads) | {
        "num_hidden_layers": cfg.req_int("num_hidden_layers"),
        "num_key_value_heads": cfg.opt_int("num_key_value_heads", heads),
        "intermediate_size": cfg.req_int("intermediate_size"),
        "tie_word_embeddings": cfg.opt_bool("tie_word_embeddings", False),
        "max_position_embeddings": cfg.opt_int("max_position_embeddings", 2048),
        "attention_bias": True,
        "o_proj_bias": True,
        "mlp_bias": True,
        "mlp_gated": False,
        "hidden_act": cfg.opt_str("hidden_act", "gelu_new"),
        "residual_dropout": cfg.opt_float("resid_pdrop", 0.0),
        "norms_per_layer": 1,
        "decoder_layer_class": "PhiDecoderLayer",
        "approximations": notes,
    }


def _bloom(cfg: ConfigView) -> dict[str, Any]:
    hidden = cfg.req_int("hidden_size", "n_embed")
    heads = cfg.req_int("n_head", "num_attention_heads")
    notes = [
        f"bloom: embedding LayerNorm ({2 * hidden} params) not counted",
        "bloom: ALiBi attention bias (no position parameters) modelled like RoPE attention",
    ]
    if not cfg.has("seq_length"):
        notes.append("bloom: no seq_length in config; max_position_embeddings assumed 2048")
    return _layernorm_block(cfg, hidden, heads) | {
        "num_hidden_layers": cfg.req_int("n_layer", "num_hidden_layers"),
        "num_key_value_heads": heads,
        "intermediate_size": 4 * hidden,  # modeling_bloom.py: dense_h_to_4h
        "tie_word_embeddings": cfg.opt_bool("tie_word_embeddings", True),
        "max_position_embeddings": cfg.opt_int("seq_length", 2048),
        "attention_bias": True,
        "o_proj_bias": True,
        "mlp_bias": True,
        "mlp_gated": False,
        "fused_qkv": True,
        "hidden_act": "gelu",
        "residual_dropout": cfg.opt_float("hidden_dropout", 0.0),
        "decoder_layer_class": "BloomBlock",
        "approximations": notes,
    }


def _qwen_v1(cfg: ConfigView) -> dict[str, Any]:
    hidden = cfg.req_int("hidden_size")
    heads = cfg.req_int("num_attention_heads")
    biased = not cfg.opt_bool("no_bias", True)
    return {
        "hidden_size": hidden,
        "intermediate_size": cfg.req_int("intermediate_size") // 2,  # w1, w2 are ff/2 wide each
        "num_hidden_layers": cfg.req_int("num_hidden_layers"),
        "num_attention_heads": heads,
        "num_key_value_heads": heads,
        "head_dim": cfg.opt_int("kv_channels", hidden // heads),
        "vocab_size": cfg.req_int("vocab_size"),
        "tie_word_embeddings": cfg.opt_bool("tie_word_embeddings", False),
        "max_position_embeddings": cfg.opt_int("max_position_embeddings", cfg.opt_int("seq_length", 2048)),
        "attention_bias": True,  # c_attn always has a bias
        "o_proj_bias": biased,
        "mlp_bias": biased,
        "fused_qkv": True,
        "decoder_layer_class": "QWenBlock",
        "approximations": [
            "qwen v1 (remote code): shapes follow Qwen's modeling_qwen.py (c_attn, w1/w2 of width "
            "intermediate_size/2); not checked against transformers"
        ],
    }


def _mpt(cfg: ConfigView) -> dict[str, Any]:
    """MPT (llm-foundry / MosaicML ``configuration_mpt.py``).

    d_model, n_heads, n_layers, expansion_ratio, fused Wqkv, GELU MLP, LayerNorm (bias unless ``no_bias``), tied
    embedding; ``attn_config.kv_n_heads`` for grouped-query attention. A learned position table (``learned_pos_emb``,
    max_seq_len × d_model) is a lookup, not counted (named in ``approximations``).
    """
    hidden = cfg.req_int("d_model")
    heads = cfg.req_int("n_heads")
    raw_attn = cfg.raw.get("attn_config")
    attn: dict[str, Any] = raw_attn if isinstance(raw_attn, dict) else {}
    kv_heads = attn.get("kv_n_heads") if attn.get("attn_type") == "grouped_query_attention" else heads
    if isinstance(kv_heads, bool) or not isinstance(kv_heads, int) or kv_heads <= 0:
        raise cfg._error(f"attn_config.kv_n_heads must be a positive integer, got {kv_heads!r}")
    bias = not cfg.opt_bool("no_bias", False)
    notes = []
    if cfg.opt_bool("learned_pos_emb", True) and not attn.get("alibi", False):
        notes.append("mpt: learned position table (max_seq_len × d_model, a lookup) not counted")
    return {
        "hidden_size": hidden,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": hidden // heads,
        "vocab_size": cfg.req_int("vocab_size"),
        "num_hidden_layers": cfg.req_int("n_layers"),
        "intermediate_size": cfg.opt_int("expansion_ratio", 4) * hidden,
        "tie_word_embeddings": cfg.opt_bool("tie_word_embeddings", True),
        "max_position_embeddings": cfg.opt_int("max_seq_len", 2048),
        "attention_bias": bias,
        "o_proj_bias": bias,
        "mlp_bias": bias,
        "mlp_gated": False,
        "fused_qkv": True,
        "hidden_act": "gelu",
        "residual_dropout": cfg.opt_float("resid_pdrop", 0.0),
        "norm_has_bias": bias,
        "norm_type": "layernorm",
        "decoder_layer_class": "MPTBlock",
        "approximations": notes,
    }


def generic_fields(cfg: ConfigView) -> dict[str, Any]:
    """ModelSpec fields of an unknown family, read as a Llama-style block (the approximations say so)."""
    model_type = cfg.opt_str("model_type", "unknown")
    archs = cfg.raw.get("architectures")
    arch = archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else ""
    stem = arch.removesuffix("ForCausalLM") if arch.endswith("ForCausalLM") else model_type.title()
    fields = _llama_like(cfg) | {
        "tie_word_embeddings": cfg.opt_bool("tie_word_embeddings", False),
        "max_position_embeddings": cfg.opt_int("max_position_embeddings", 2048),
        "attention_bias": cfg.opt_bool("attention_bias", False),
        "mlp_bias": cfg.opt_bool("mlp_bias", False),
        "decoder_layer_class": f"{stem}DecoderLayer",
    }
    notes = [
        f"model_type {model_type!r} is not a known family: counted as a Llama-style block (gated MLP, "
        "2 RMSNorms, no o_proj bias); extra modules (e.g. q/k norms) are not counted",
        f"decoder_layer_class {stem}DecoderLayer guessed from 'architectures'",
    ]
    if not cfg.has("max_position_embeddings"):
        notes.append("no max_position_embeddings in config; assumed 2048")
    return fields | {"approximations": notes}


FAMILIES: Final[dict[str, Callable[[ConfigView], dict[str, Any]]]] = {
    "mpt": _mpt,
    # model_type -> ModelSpec fields; generic_fields for any other model_type
    "llama": _llama,
    "mistral": _mistral,
    "qwen2": _qwen2,
    "gemma": _gemma,
    "gemma2": _gemma2,
    "phi3": _phi3,
    "mixtral": _mixtral,
    "falcon": _falcon,
    "RefinedWeb": _falcon,
    "RefinedWebModel": _falcon,
    "gpt_neox": _gpt_neox,
    "stablelm": _stablelm,
    "phi": _phi,
    "bloom": _bloom,
    "qwen": _qwen_v1,
}
