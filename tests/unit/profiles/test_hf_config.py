"""ModelSpec from config.json: exact families give the models.md counts, generic families name their
approximations, malformed files raise ConfigError, and (when torch/transformers are installed) every
fixture is checked against the model transformers builds from it on the meta device."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from autotune.costmodel.params import count_params, linear_modules
from autotune.errors import ConfigError
from autotune.profiles.families import EXACT_MODEL_TYPES, GENERIC_COUNT_REL_TOLERANCE
from autotune.profiles.hf_config import model_spec_from_config

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "configs"

# Fixture directory -> (model_type, the counted total of test_catalog.COUNTED_PARAMS).
EXACT = {
    "llama2-7b": ("llama", 6_738_415_616),
    "llama3-8b": ("llama", 8_030_261_248),
    "llama3.2-1b": ("llama", 1_235_814_400),
    "mistral-7b-v0.1": ("mistral", 7_241_732_096),
    "qwen2.5-0.5b": ("qwen2", 494_032_768),
    "qwen2.5-7b": ("qwen2", 7_615_616_512),
    "gemma-7b": ("gemma", 8_537_680_896),
    "gemma2-9b": ("gemma2", 9_241_705_984),
    "phi3-mini-4k": ("phi3", 3_821_079_552),
}

# Fixture directory -> a phrase its approximations must contain.
GENERIC = {
    "mixtral-8x7b": "MoE",
    "falcon-7b": "parallel",
    "falcon-40b": "parallel",
    "pythia-160m": "parallel residual",
    "phi-2": "lm_head bias (51200 params)",
    "bloom-560m": "embedding LayerNorm (2048 params)",
    "qwen-7b": "remote code",
    "qwen3-0.6b": "not a known family",
}
NO_TRANSFORMERS_CLASS = {"qwen-7b"}  # Qwen v1 needs trust_remote_code

LAYER_CLASS = {
    "llama": "LlamaDecoderLayer",
    "mistral": "MistralDecoderLayer",
    "qwen2": "Qwen2DecoderLayer",
    "gemma": "GemmaDecoderLayer",
    "gemma2": "Gemma2DecoderLayer",
    "phi3": "Phi3DecoderLayer",
}


def write_config(tmp_path: Path, config: dict[str, Any], name: str = "model") -> Path:
    directory = tmp_path / name
    directory.mkdir()
    (directory / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return directory


def small_config(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "model_type": "llama",
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 100,
    }
    return base | overrides


# --- exact families ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(EXACT))
def test_exact_family_counts_match_models_md(name: str) -> None:
    model_type, counted = EXACT[name]
    model = model_spec_from_config(FIXTURES / name)
    assert model.model_type == model_type
    assert model.decoder_layer_class == LAYER_CLASS[model_type]
    assert model.approximations == ()
    assert count_params(model).total_params == counted


def test_every_exact_family_has_a_fixture() -> None:
    assert {model_type for model_type, _ in EXACT.values()} == set(EXACT_MODEL_TYPES)


def test_key_and_source_come_from_the_path() -> None:
    from_dir = model_spec_from_config(FIXTURES / "llama3-8b")
    from_file = model_spec_from_config(str(FIXTURES / "llama3-8b" / "config.json"))
    assert from_dir == from_file
    assert from_dir.key == "llama3-8b"
    assert from_dir.source == str((FIXTURES / "llama3-8b" / "config.json").resolve())
    assert Path(from_dir.source).is_absolute()


def test_key_of_a_named_json_file_is_its_stem(tmp_path: Path) -> None:
    path = tmp_path / "my-model.json"
    path.write_text(json.dumps(small_config()), encoding="utf-8")
    assert model_spec_from_config(path).key == "my-model"


def test_family_specific_fields() -> None:
    gemma = model_spec_from_config(FIXTURES / "gemma-7b")  # no tie_word_embeddings key in the file
    assert gemma.tie_word_embeddings is True
    assert gemma.head_dim == 256 and gemma.q_dim == 4096 != gemma.hidden_size
    assert gemma.hidden_act == "gelu_pytorch_tanh"  # legacy "gelu" means the tanh approximation

    gemma2 = model_spec_from_config(FIXTURES / "gemma2-9b")
    assert gemma2.norms_per_layer == 4
    assert gemma2.final_logit_softcapping == 30.0

    phi3 = model_spec_from_config(FIXTURES / "phi3-mini-4k")
    assert phi3.fused_qkv and phi3.fused_gate_up
    assert [m.name for m in linear_modules(phi3)] == ["qkv_proj", "o_proj", "gate_up_proj", "down_proj"]

    qwen2 = model_spec_from_config(FIXTURES / "qwen2.5-0.5b")
    assert qwen2.attention_bias and not qwen2.o_proj_bias and qwen2.tie_word_embeddings

    llama32 = model_spec_from_config(FIXTURES / "llama3.2-1b")
    assert llama32.head_dim == 64 and llama32.tie_word_embeddings
    assert model_spec_from_config(FIXTURES / "mistral-7b-v0.1").final_logit_softcapping is None


def test_llama_attention_bias_covers_all_four_projections(tmp_path: Path) -> None:
    plain = count_params(model_spec_from_config(write_config(tmp_path, small_config(), "a")))
    biased_spec = model_spec_from_config(write_config(tmp_path, small_config(attention_bias=True, mlp_bias=True), "b"))
    assert biased_spec.attention_bias and biased_spec.o_proj_bias and biased_spec.mlp_bias
    # per layer: q 64 + k 32 + v 32 + o 64 biases, gate 128 + up 128 + down 64 biases; 2 layers.
    assert count_params(biased_spec).total_params - plain.total_params == 2 * (192 + 320)


def test_missing_optional_keys_take_the_transformers_class_defaults(tmp_path: Path) -> None:
    no_kv: dict[str, Any] = small_config(num_attention_heads=16)
    del no_kv["num_key_value_heads"]
    assert model_spec_from_config(write_config(tmp_path, no_kv, "llama")).num_key_value_heads == 16
    # MistralConfig.num_key_value_heads defaults to 8 when the key is absent.
    mistral = model_spec_from_config(write_config(tmp_path, no_kv | {"model_type": "mistral"}, "mistral"))
    assert mistral.num_key_value_heads == 8
    explicit_null = model_spec_from_config(
        write_config(tmp_path, no_kv | {"model_type": "mistral", "num_key_value_heads": None}, "null")
    )
    assert explicit_null.num_key_value_heads == 16
    assert model_spec_from_config(write_config(tmp_path, no_kv, "l2")).max_position_embeddings == 2048


# --- generic families ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(GENERIC))
def test_generic_families_name_their_approximations(name: str) -> None:
    model = model_spec_from_config(FIXTURES / name)
    assert any(GENERIC[name] in note for note in model.approximations), model.approximations
    assert all("\n" not in note for note in model.approximations)


def test_generic_family_field_mapping() -> None:
    falcon = model_spec_from_config(FIXTURES / "falcon-7b")
    assert (falcon.num_key_value_heads, falcon.head_dim, falcon.intermediate_size) == (1, 64, 4 * 4544)
    assert falcon.fused_qkv and not falcon.mlp_gated and falcon.norm_has_bias
    assert falcon.norms_per_layer == 1 and falcon.tie_word_embeddings
    falcon40 = model_spec_from_config(FIXTURES / "falcon-40b")
    assert (falcon40.num_key_value_heads, falcon40.norms_per_layer) == (8, 2)

    bloom = model_spec_from_config(FIXTURES / "bloom-560m")  # n_layer / n_head keys
    assert (bloom.num_hidden_layers, bloom.num_attention_heads, bloom.intermediate_size) == (24, 16, 4096)
    assert bloom.attention_bias and bloom.o_proj_bias and bloom.mlp_bias

    mixtral = model_spec_from_config(FIXTURES / "mixtral-8x7b")
    assert (mixtral.num_experts, mixtral.num_experts_per_token) == (8, 2)

    phi2 = model_spec_from_config(FIXTURES / "phi-2")
    assert phi2.norms_per_layer == 1 and not phi2.mlp_gated and phi2.mlp_bias and phi2.norm_has_bias

    stablelm = model_spec_from_config(FIXTURES / "stablelm-2-1_6b")
    assert stablelm.attention_bias and not stablelm.o_proj_bias and stablelm.mlp_gated


def test_qwen_v1_count_by_hand() -> None:
    # modeling_qwen.py (remote code): c_attn h->3h with bias, c_proj h->h, w1/w2 h->I/2, c_proj I/2->h,
    # ln_1/ln_2 RMSNorm, untied lm_head; no_bias=true. h=4096, I/2=11008, L=32, V=151936.
    model = model_spec_from_config(FIXTURES / "qwen-7b")
    per_layer = 4 * 4096 * 4096 + 3 * 4096 + 3 * 4096 * 11008 + 2 * 4096
    assert count_params(model).total_params == 2 * 151936 * 4096 + 32 * per_layer + 4096


def test_unknown_model_type_gets_llama_style_count(tmp_path: Path) -> None:
    config = small_config(model_type="mystery", architectures=["MysteryForCausalLM"])
    model = model_spec_from_config(write_config(tmp_path, config))
    assert model.decoder_layer_class == "MysteryDecoderLayer"
    assert any("'mystery' is not a known family" in note for note in model.approximations)
    assert any("max_position_embeddings" in note for note in model.approximations)
    llama = model_spec_from_config(write_config(tmp_path, small_config(), "llama"))
    assert count_params(model).total_params == count_params(llama).total_params


# --- malformed inputs ----------------------------------------------------------------------------


def assert_one_line_config_error(path: Path | str, *phrases: str) -> None:
    with pytest.raises(ConfigError) as info:
        model_spec_from_config(path)
    message = str(info.value)
    assert "\n" not in message
    for phrase in phrases:
        assert phrase in message, message


def test_missing_path(tmp_path: Path) -> None:
    assert_one_line_config_error(tmp_path / "nope", str(tmp_path / "nope"), "no such file")


def test_directory_without_config(tmp_path: Path) -> None:
    assert_one_line_config_error(tmp_path, str(tmp_path.resolve()), "no config.json")


@pytest.mark.parametrize(
    ("text", "phrase"),
    [
        ("{not json", "invalid JSON"),
        ("[1, 2]", "expected a JSON object, got list"),
        ('"llama"', "expected a JSON object, got str"),
    ],
)
def test_unparsable_documents(tmp_path: Path, text: str, phrase: str) -> None:
    (tmp_path / "config.json").write_text(text, encoding="utf-8")
    assert_one_line_config_error(tmp_path, str(tmp_path.resolve() / "config.json"), phrase)


@pytest.mark.parametrize(
    ("overrides", "phrase"),
    [
        ({"hidden_size": None}, "missing required key 'hidden_size'"),
        ({"vocab_size": None}, "missing required key 'vocab_size'"),
        ({"num_hidden_layers": -2}, "'num_hidden_layers' must be positive, got -2"),
        ({"num_attention_heads": 0}, "'num_attention_heads' must be positive"),
        ({"intermediate_size": "big"}, "'intermediate_size' must be an integer"),
        ({"intermediate_size": True}, "'intermediate_size' must be an integer"),
        ({"tie_word_embeddings": "yes"}, "'tie_word_embeddings' must be true or false"),
        ({"num_key_value_heads": 3}, "multiple of num_key_value_heads"),
        ({"model_type": None}, "'model_type'"),
        ({"model_type": "mystery", "intermediate_size": None}, "missing required key 'intermediate_size'"),
        (
            {"model_type": "bloom", "n_layer": None, "num_hidden_layers": None},
            "'n_layer' / 'num_hidden_layers'",
        ),
    ],
)
def test_bad_keys(tmp_path: Path, overrides: dict[str, Any], phrase: str) -> None:
    config = {k: v for k, v in small_config(**overrides).items() if v is not None}
    directory = write_config(tmp_path, config)
    assert_one_line_config_error(directory, str(directory / "config.json"), phrase)


# --- cross-check against transformers on the meta device ----------------------------------------


def transformers_model(directory: Path) -> Any:
    """The model transformers builds from the local config.json, on the meta device (no memory)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    config = transformers.AutoConfig.from_pretrained(directory)
    with torch.device("meta"):
        return transformers.AutoModelForCausalLM.from_config(config)


def check_against_transformers(directory: Path, missing_params: int) -> None:
    """Our count is transformers' minus exactly the ``missing_params`` the approximations name."""
    torch = pytest.importorskip("torch")
    spec = model_spec_from_config(directory)
    model = transformers_model(directory)
    theirs = sum(p.numel() for p in model.parameters())  # tied weights are counted once
    ours = count_params(spec).total_params
    assert theirs - ours == missing_params
    layers = [m for m in model.modules() if type(m).__name__ == spec.decoder_layer_class]
    assert len(layers) == spec.num_hidden_layers
    if spec.num_experts == 1:  # transformers 5 stores MoE experts as 3-D parameters, not nn.Linear
        shapes = Counter(
            (m.in_features, m.out_features)
            for layer in layers
            for m in layer.modules()
            if isinstance(m, torch.nn.Linear)
        )
        expected: Counter[tuple[int, int]] = Counter()
        for mod in linear_modules(spec):
            expected[(mod.in_features, mod.out_features)] += mod.count
        assert shapes == expected


@pytest.mark.parametrize("name", sorted(EXACT))
def test_exact_fixture_matches_transformers(name: str) -> None:
    check_against_transformers(FIXTURES / name, missing_params=0)


# Parameters transformers has that the approximations name (by hand): Phi-2 lm_head bias V = 51200;
# Bloom embedding LayerNorm 2h = 2·1024; Qwen3 q_norm/k_norm RMSNorm d each per layer, 2·128·28.
GENERIC_MISSING = {"phi-2": 51200, "bloom-560m": 2 * 1024, "qwen3-0.6b": 2 * 128 * 28}


@pytest.mark.parametrize("name", sorted(set(GENERIC) - NO_TRANSFORMERS_CLASS | {"stablelm-2-1_6b"}))
def test_generic_fixture_against_transformers(name: str) -> None:
    missing = GENERIC_MISSING.get(name, 0)
    check_against_transformers(FIXTURES / name, missing_params=missing)
    total = count_params(model_spec_from_config(FIXTURES / name)).total_params + missing
    assert missing / total <= GENERIC_COUNT_REL_TOLERANCE


# (config, parameters transformers has that our count leaves out and the approximations name).
# Small shape: h=64, n_q=4 (d=16), n_kv=2, L=2, V=100.
VARIANTS: list[tuple[dict[str, Any], int]] = [
    (small_config(attention_bias=True, mlp_bias=True), 0),
    (small_config(head_dim=32), 0),
    (small_config(model_type="gemma", attention_bias=True, head_dim=16), 0),
    (small_config(model_type="gemma2", num_key_value_heads=4), 0),
    (small_config(model_type="mistral", num_key_value_heads=None, num_attention_heads=8), 0),
    (small_config(model_type="qwen2", tie_word_embeddings=True), 0),
    (small_config(model_type="phi3", num_key_value_heads=1, pad_token_id=0, eos_token_id=0), 0),
    (small_config(model_type="mixtral", num_local_experts=4, num_experts_per_tok=2), 0),
    (
        small_config(model_type="falcon", bias=True, multi_query=False, parallel_attn=False, ffn_hidden_size=96),
        0,
    ),
    (small_config(model_type="falcon", new_decoder_architecture=True, num_kv_heads=2), 0),
    (small_config(model_type="gpt_neox", attention_bias=False, use_parallel_residual=False), 0),
    # per-head q/k LayerNorm without bias: (4 + 2) heads · 16 per layer.
    (small_config(model_type="stablelm", qk_layernorm=True, use_parallel_residual=True), 2 * 6 * 16),
    # q/k LayerNorm with bias: 4·16 per layer, plus the lm_head bias V.
    (small_config(model_type="phi", qk_layernorm=True, num_key_value_heads=4), 2 * 4 * 16 + 100),
    # embedding LayerNorm with bias: 2h.
    (small_config(model_type="bloom", n_layer=2, n_head=4), 2 * 64),
]


@pytest.mark.parametrize(("config", "missing"), VARIANTS, ids=[str(i) for i in range(len(VARIANTS))])
def test_variant_configs_match_transformers(tmp_path: Path, config: dict[str, Any], missing: int) -> None:
    config = {k: v for k, v in config.items() if v is not None}
    directory = write_config(tmp_path, config)
    if missing:
        assert any("not counted" in note for note in model_spec_from_config(directory).approximations)
    check_against_transformers(directory, missing_params=missing)
