"""Build a :class:`~autotune.schemas.ModelSpec` from the header of a ``.gguf`` file: metadata → model fields.

The file itself is read by :mod:`autotune.profiles.gguf_file` (the binary format).

Mapping (key names as written by llama.cpp's ``convert_hf_to_gguf.py``): ``<arch>.embedding_length``
→ hidden_size, ``feed_forward_length`` → intermediate_size, ``block_count`` → num_hidden_layers,
``attention.head_count`` / ``head_count_kv`` → heads / KV heads, ``attention.key_length`` →
head_dim, ``context_length`` → max_position_embeddings, ``vocab_size`` (else the length of
``tokenizer.ggml.tokens``) → vocab_size. Absent optional keys take llama.cpp's defaults
(``llama-model.cpp``: n_head_kv = n_head, head_dim = n_embd / n_head), which differ from some
transformers config-class defaults. Tied embeddings = no ``output.weight`` tensor (the rule of
transformers' ``load_gguf_checkpoint``); biases come from the tensor names (``blk.0.attn_q.bias``).
The module layout of each family is then that of :mod:`autotune.profiles.hf_config`: the metadata
is translated into config.json keys and handed to the same family functions.

Architectures: llama (Mixtral when ``llama.expert_count`` > 1, as llama.cpp writes it), mistral,
qwen2, gemma, gemma2, phi3. Any other ``general.architecture`` with the required keys is counted
as a Llama-style block whose gated/fused/bias/LayerNorm layout is read from the tensor names,
with notes in ``ModelSpec.approximations``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from pydantic import ValidationError

from autotune.errors import ConfigError
from autotune.profiles.families import FAMILIES, ConfigView, generic_fields
from autotune.profiles.gguf_file import GgufArray, GgufHeader, read_gguf_header
from autotune.schemas.model import ModelSpec
from autotune.validation import format_validation_error

GGUF_ARCH_TO_MODEL_TYPE: Final[dict[str, str]] = {
    arch: arch for arch in ("llama", "mistral", "qwen2", "gemma", "gemma2", "phi3")
}
"""``general.architecture`` → config.json ``model_type`` of the exact families."""


_QKV_BIASES: Final[frozenset[str]] = frozenset({"attn_q.bias", "attn_k.bias", "attn_v.bias", "attn_qkv.bias"})
_MLP_BIASES: Final[frozenset[str]] = frozenset(
    f"ffn_{proj}{exps}.bias" for proj in ("gate", "up", "down") for exps in ("", "_exps")
)
_GENERIC_TOP_COUNTED: Final[frozenset[str]] = frozenset(
    {"token_embd.weight", "output.weight", "output_norm.weight", "output_norm.bias"}
)
_GENERIC_BLOCK_COUNTED: Final[frozenset[str]] = frozenset(
    {f"{module}.{kind}" for kind in ("weight", "bias") for module in ("attn_norm", "ffn_norm")}
    | {f"attn_{proj}.{kind}" for kind in ("weight", "bias") for proj in ("q", "k", "v", "qkv", "output")}
    | {
        f"ffn_{proj}{exps}.{kind}"
        for kind in ("weight", "bias")
        for proj in ("gate", "up", "down")
        for exps in ("", "_exps")
    }
    | {"ffn_gate_inp.weight"}
)
"""Tensor names (outside blocks / inside blocks without ``blk.N.``) the generic Llama-style count covers."""


class _Metadata:
    """Typed access to ``<arch>.*`` keys of one GGUF header; every problem is a one-line ConfigError."""

    def __init__(self, header: GgufHeader, path: Path, arch: str) -> None:
        self.header = header
        self.path = path
        self.arch = arch
        self.block_tensors = frozenset(
            name.split(".", 2)[2] for name in header.tensor_names if name.startswith("blk.") and name.count(".") >= 2
        )

    def error(self, problem: str) -> ConfigError:
        return ConfigError(f"{self.path}: {problem}")

    def _int(self, key: str) -> int | None:
        value = self.header.metadata.get(key)
        if value is None:
            return None
        if isinstance(value, GgufArray) and value.values:  # per-layer values (one per block)
            if len(set(value.values)) != 1:
                raise self.error(f"key {key!r} varies across layers ({list(value.values)}): not supported")
            value = value.values[0]
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(f"key {key!r} must be an integer, got {value!r}")
        if value <= 0:
            raise self.error(f"key {key!r} must be positive, got {value}")
        return value

    def req_int(self, name: str) -> int:
        value = self._int(f"{self.arch}.{name}")
        if value is None:
            raise self.error(f"missing required key '{self.arch}.{name}'")
        return value

    def opt_int(self, name: str) -> int | None:
        return self._int(f"{self.arch}.{name}")

    def opt_float(self, name: str) -> float | None:
        key = f"{self.arch}.{name}"
        value = self.header.metadata.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.error(f"key {key!r} must be a number, got {value!r}")
        return float(value)

    def vocab_size(self) -> int:
        value = self.opt_int("vocab_size")
        if value is not None:
            return value
        tokens = self.header.metadata.get("tokenizer.ggml.tokens")
        if isinstance(tokens, GgufArray) and tokens.length > 0:
            return tokens.length
        raise self.error(f"missing '{self.arch}.vocab_size' and 'tokenizer.ggml.tokens' (vocabulary size)")

    def has_block_tensor(self, names: frozenset[str] | set[str]) -> bool:
        return not self.block_tensors.isdisjoint(names)


def _config_keys(meta: _Metadata) -> dict[str, Any]:
    """config.json-style keys (hf_config's vocabulary) from the GGUF metadata and tensor names."""
    hidden = meta.req_int("embedding_length")
    heads = meta.req_int("attention.head_count")
    raw: dict[str, Any] = {
        "hidden_size": hidden,
        "intermediate_size": meta.req_int("feed_forward_length"),
        "num_hidden_layers": meta.req_int("block_count"),
        "num_attention_heads": heads,
        # llama.cpp defaults (llama-model.cpp), not the transformers config-class ones:
        "num_key_value_heads": meta.opt_int("attention.head_count_kv") or heads,
        "head_dim": meta.opt_int("attention.key_length") or hidden // heads,
        "vocab_size": meta.vocab_size(),
        "tie_word_embeddings": "output.weight" not in meta.header.tensor_names,
        "attention_bias": meta.has_block_tensor(_QKV_BIASES | {"attn_output.bias"}),
        "mlp_bias": meta.has_block_tensor(_MLP_BIASES),
    }
    context = meta.opt_int("context_length")
    if context is not None:
        raw["max_position_embeddings"] = context
    softcap = meta.opt_float("final_logit_softcapping")
    if softcap is not None:
        raw["final_logit_softcapping"] = softcap
    experts = meta.opt_int("expert_count")
    if experts is not None and experts > 1:
        raw["num_local_experts"] = experts
        raw["num_experts_per_tok"] = meta.opt_int("expert_used_count") or 1
    return raw


def _generic_fields(meta: _Metadata, cfg: ConfigView) -> dict[str, Any]:
    """Llama-style count (hf_config's generic family) with the layout read from the tensor names."""
    blocks = meta.block_tensors
    fields = generic_fields(cfg) | {
        "mlp_gated": bool(blocks & {"ffn_gate.weight", "ffn_gate_exps.weight"}),
        "fused_qkv": "attn_qkv.weight" in blocks,
        "attention_bias": meta.has_block_tensor(_QKV_BIASES),
        "o_proj_bias": "attn_output.bias" in blocks,
        "norm_has_bias": "attn_norm.bias" in blocks,
    }
    notes = [
        f"GGUF architecture {meta.arch!r} is not a known family: counted as a Llama-style block "
        "(2 norms per block; gated MLP, fused qkv, biases and LayerNorm biases read from the tensor names)",
        f"decoder_layer_class {fields['decoder_layer_class']} guessed from general.architecture",
    ]
    if cfg.has("num_local_experts"):
        fields["num_experts"] = cfg.raw["num_local_experts"]
        fields["num_experts_per_token"] = cfg.raw["num_experts_per_tok"]
        fields["intermediate_size"] = meta.opt_int("expert_feed_forward_length") or fields["intermediate_size"]
        notes.append("MoE: all experts held in memory; each token assumed to use expert_used_count experts")
    top = sorted(n for n in meta.header.tensor_names if not n.startswith("blk.") and n not in _GENERIC_TOP_COUNTED)
    uncounted = top + sorted(f"blk.N.{n}" for n in meta.block_tensors - _GENERIC_BLOCK_COUNTED)
    if uncounted:
        notes.append(f"tensors not counted: {', '.join(uncounted)}")
    if not cfg.has("max_position_embeddings"):
        notes.append(f"no '{meta.arch}.context_length' in file; assumed {fields['max_position_embeddings']}")
    return fields | {"approximations": notes}


def _model_type(arch: str, cfg: ConfigView) -> str | None:
    """config.json model_type of an exact family (Mixtral is llama with experts in llama.cpp)."""
    if arch == "llama" and cfg.has("num_local_experts"):
        return "mixtral"
    return GGUF_ARCH_TO_MODEL_TYPE.get(arch)


def model_spec_from_gguf(path: str | Path) -> ModelSpec:
    """Read the architecture of a ``.gguf`` file into a :class:`ModelSpec` (header only, no numpy/torch).

    ``key`` is the file stem, ``source`` the absolute path, ``hf_repo_id`` None, ``params_published``
    the file's ``general.size_label`` and ``notes`` its ``general.name``. Key mapping, defaults and
    families are described in the module docstring.

    Raises:
        ConfigError: everything :func:`read_gguf_header` raises, plus a missing
            ``general.architecture`` or required ``<arch>.*`` key, a non-integer/non-positive size,
            per-layer values that differ between layers, or shapes that do not form a valid model.
            One line naming the file.
    """
    header = read_gguf_header(path)
    gguf_path = Path(path).expanduser().resolve()
    arch = header.metadata.get("general.architecture")
    if not isinstance(arch, str) or not arch:
        raise ConfigError(f"{gguf_path}: missing or empty 'general.architecture'")
    meta = _Metadata(header, gguf_path, arch)
    raw = _config_keys(meta)
    cfg = ConfigView(raw, gguf_path)
    model_type = _model_type(arch, cfg)
    cfg.raw["model_type"] = model_type or arch
    if model_type is None:
        model_type, fields = arch, _generic_fields(meta, cfg)
    else:
        fields = FAMILIES[model_type](cfg)
        if not cfg.has("max_position_embeddings"):
            note = f"no '{arch}.context_length' in file; assumed {fields['max_position_embeddings']}"
            fields["approximations"] = [*fields.get("approximations", []), note]
    size_label = header.metadata.get("general.size_label")
    name = header.metadata.get("general.name")
    try:
        return ModelSpec(
            key=gguf_path.stem,
            hf_repo_id=None,
            model_type=model_type,
            source=str(gguf_path),
            params_published=size_label if isinstance(size_label, str) else None,
            notes=name if isinstance(name, str) else "",
            **fields,
        )
    except ValidationError as exc:
        raise ConfigError(f"{gguf_path}: not a valid model ({format_validation_error(exc, ModelSpec)})") from exc
