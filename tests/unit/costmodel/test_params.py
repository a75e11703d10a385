"""Parameter counts against the counted totals of the catalog (``COUNTED_PARAMS`` in test_catalog.py), LoRA counts by
hand, and structural properties of the counting rule."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autotune.costmodel.params import count_params, linear_modules, lora_params, lora_target_modules
from autotune.errors import InvalidRequestError
from autotune.schemas.model import ModelSpec

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "configs"


def spec(**fields: Any) -> ModelSpec:
    """A ModelSpec with the bookkeeping fields filled in."""
    fields.setdefault("key", "test")
    fields.setdefault("model_type", "llama")
    fields.setdefault("max_position_embeddings", 4096)
    fields.setdefault("source", "tests")
    return ModelSpec(**fields)


# key: (h, I, L, n_q, n_kv, d, V, tied, qkv bias, norms per layer, fused (Phi-3), counted total),
# typed from models.md.
CATALOG: dict[str, tuple[int, int, int, int, int, int, int, bool, bool, int, bool, int]] = {
    "llama-7b": (4096, 11008, 32, 32, 32, 128, 32000, False, False, 2, False, 6_738_415_616),
    "llama-13b": (5120, 13824, 40, 40, 40, 128, 32000, False, False, 2, False, 13_015_864_320),
    "llama-30b": (6656, 17920, 60, 52, 52, 128, 32000, False, False, 2, False, 32_528_943_616),
    "llama-65b": (8192, 22016, 80, 64, 64, 128, 32000, False, False, 2, False, 65_285_660_672),
    "llama2-70b": (8192, 28672, 80, 64, 8, 128, 32000, False, False, 2, False, 68_976_648_192),
    "llama3-8b": (4096, 14336, 32, 32, 8, 128, 128256, False, False, 2, False, 8_030_261_248),
    "llama3-70b": (8192, 28672, 80, 64, 8, 128, 128256, False, False, 2, False, 70_553_706_496),
    "llama3.1-405b": (16384, 53248, 126, 128, 8, 128, 128256, False, False, 2, False, 405_853_388_800),
    "llama3.2-1b": (2048, 8192, 16, 32, 8, 64, 128256, True, False, 2, False, 1_235_814_400),
    "llama3.2-3b": (3072, 8192, 28, 24, 8, 128, 128256, True, False, 2, False, 3_212_749_824),
    "gemma-2b": (2048, 16384, 18, 8, 1, 256, 256000, True, False, 2, False, 2_506_172_416),
    "gemma-7b": (3072, 24576, 28, 16, 16, 256, 256000, True, False, 2, False, 8_537_680_896),
    "gemma2-2b": (2304, 9216, 26, 8, 4, 256, 256000, True, False, 4, False, 2_614_341_888),
    "gemma2-9b": (3584, 14336, 42, 16, 8, 256, 256000, True, False, 4, False, 9_241_705_984),
    "gemma2-27b": (4608, 36864, 46, 32, 16, 128, 256000, True, False, 4, False, 27_227_128_320),
    "phi3-mini": (3072, 8192, 32, 32, 32, 96, 32064, False, False, 2, True, 3_821_079_552),
    "phi3-medium": (5120, 17920, 40, 40, 10, 128, 32064, False, False, 2, True, 13_960_238_080),
    "mistral-7b-v0.1": (4096, 14336, 32, 32, 8, 128, 32000, False, False, 2, False, 7_241_732_096),
    "mistral-7b-v0.3": (4096, 14336, 32, 32, 8, 128, 32768, False, False, 2, False, 7_248_023_552),
    "qwen2.5-0.5b": (896, 4864, 24, 14, 2, 64, 151936, True, True, 2, False, 494_032_768),
    "qwen2.5-1.5b": (1536, 8960, 28, 12, 2, 128, 151936, True, True, 2, False, 1_543_714_304),
    "qwen2.5-3b": (2048, 11008, 36, 16, 2, 128, 151936, True, True, 2, False, 3_085_938_688),
    "qwen2.5-7b": (3584, 18944, 28, 28, 4, 128, 152064, False, True, 2, False, 7_615_616_512),
    "qwen2.5-14b": (5120, 13824, 48, 40, 8, 128, 152064, False, True, 2, False, 14_770_033_664),
    "qwen2.5-32b": (5120, 27648, 64, 40, 8, 128, 152064, False, True, 2, False, 32_763_876_352),
    "qwen2.5-72b": (8192, 29568, 80, 64, 8, 128, 152064, False, True, 2, False, 72_706_203_648),
}


def catalog_spec(key: str) -> ModelSpec:
    h, inter, layers, n_q, n_kv, d, vocab, tied, bias, norms, fused, _ = CATALOG[key]
    return spec(
        key=key,
        hidden_size=h,
        intermediate_size=inter,
        num_hidden_layers=layers,
        num_attention_heads=n_q,
        num_key_value_heads=n_kv,
        head_dim=d,
        vocab_size=vocab,
        tie_word_embeddings=tied,
        attention_bias=bias,
        norms_per_layer=norms,
        fused_qkv=fused,
        fused_gate_up=fused,
    )


@pytest.mark.parametrize("key", sorted(CATALOG))
def test_total_matches_models_md_counted_column(key: str) -> None:
    assert count_params(catalog_spec(key)).total_params == CATALOG[key][-1]


@pytest.mark.parametrize("key", sorted(CATALOG))
def test_parts_sum_to_total(key: str) -> None:
    model = catalog_spec(key)
    c = count_params(model)
    layers = model.num_hidden_layers
    per_layer = c.attention_params_per_layer + c.mlp_params_per_layer + c.norm_params_per_layer
    assert c.embedding_params + c.lm_head_params + layers * per_layer + c.final_norm_params == c.total_params
    assert c.decoder_linear_params + c.non_linear_params == c.total_params


def test_qwen25_32b_non_embedding_matches_models_md() -> None:
    # models.md: "non-embedding 31,206,740,992" = total − embedding rows − untied output head.
    c = count_params(catalog_spec("qwen2.5-32b"))
    assert c.total_params - c.embedding_params - c.lm_head_params == 31_206_740_992


def test_llama3_8b_parts_by_hand() -> None:
    c = count_params(catalog_spec("llama3-8b"))
    assert c.embedding_params == 128256 * 4096
    assert c.lm_head_params == 128256 * 4096
    assert c.attention_params_per_layer == 2 * 4096 * 4096 + 2 * 4096 * 1024
    assert c.mlp_params_per_layer == 3 * 4096 * 14336
    assert c.norm_params_per_layer == 2 * 4096
    assert c.final_norm_params == 4096
    # QLoRA keeps embeddings, head and norms unquantized (no biases in Llama 3).
    assert c.non_linear_params == 2 * 128256 * 4096 + 32 * 2 * 4096 + 4096
    assert c.matmul_params_per_token == c.decoder_linear_params + 128256 * 4096


def test_tied_model_still_multiplies_by_the_output_projection() -> None:
    c = count_params(catalog_spec("llama3.2-1b"))
    assert c.lm_head_params == 0
    assert c.matmul_params_per_token == c.decoder_linear_params + 128256 * 2048


def test_qwen2_biases_are_non_linear() -> None:
    c = count_params(catalog_spec("qwen2.5-0.5b"))
    qkv_bias_per_layer = 14 * 64 + 2 * 2 * 64
    assert c.non_linear_params == 151936 * 896 + 24 * (2 * 896 + qkv_bias_per_layer) + 896


# Small shape for hand counts: h=64, I=128, L=2, n_q=4, n_kv=2, d=16 -> q/o width 64, k/v width 32.
SMALL = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "vocab_size": 100,
}


def test_lora_all_linear_by_hand() -> None:
    # r=8 per layer: q 8·(64+64)=1024, k 8·(64+32)=768, v 768, o 1024, gate 8·(64+128)=1536,
    # up 1536, down 1536 -> 8192; two layers -> 16384. lm_head is not a target of all-linear.
    assert lora_params(spec(**SMALL), 8, ("all-linear",)) == 16384


def test_lora_subset_by_hand() -> None:
    # q and v only: (1024 + 768) · 2 layers.
    assert lora_params(spec(**SMALL), 8, ("q_proj", "v_proj")) == 3584


def test_lora_non_gated_mlp_has_up_and_down_only() -> None:
    model = spec(**SMALL, mlp_gated=False)
    names = [m.name for m in linear_modules(model)]
    assert names == ["q_proj", "k_proj", "v_proj", "o_proj", "up_proj", "down_proj"]
    with pytest.raises(InvalidRequestError, match="gate_proj"):
        lora_params(model, 8, ("gate_proj",))


def test_unknown_target_names_the_valid_ones() -> None:
    with pytest.raises(InvalidRequestError) as info:
        lora_params(spec(**SMALL), 8, ("q_proj", "query_key_value"))
    message = str(info.value)
    assert "query_key_value" in message
    for name in ("all-linear", "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"):
        assert name in message
    assert "\n" not in message


def test_fused_name_on_unfused_model_is_unknown() -> None:
    with pytest.raises(InvalidRequestError, match="qkv_proj"):
        lora_params(spec(**SMALL), 8, ("qkv_proj",))


@pytest.mark.parametrize("rank", [0, -4])
def test_lora_rank_must_be_positive(rank: int) -> None:
    with pytest.raises(InvalidRequestError, match="rank"):
        lora_params(spec(**SMALL), rank, ("all-linear",))


def test_lora_empty_targets_rejected() -> None:
    with pytest.raises(InvalidRequestError, match="empty"):
        lora_params(spec(**SMALL), 8, ())


def test_fused_phi3_modules_and_lora_mapping() -> None:
    model = catalog_spec("phi3-mini")
    mods = {m.name: m for m in linear_modules(model)}
    assert set(mods) == {"qkv_proj", "o_proj", "gate_up_proj", "down_proj"}
    assert (mods["qkv_proj"].in_features, mods["qkv_proj"].out_features) == (3072, 3 * 3072)
    assert (mods["gate_up_proj"].in_features, mods["gate_up_proj"].out_features) == (3072, 2 * 8192)
    qkv = 16 * (3072 + 9216) * 32
    assert lora_params(model, 16, ("qkv_proj",)) == qkv
    # q/k/v names all select the one fused module, counted once.
    assert lora_params(model, 16, ("q_proj",)) == qkv
    assert lora_params(model, 16, ("q_proj", "k_proj", "v_proj")) == qkv
    gate_up = 16 * (3072 + 16384) * 32
    assert lora_params(model, 16, ("gate_proj", "up_proj")) == gate_up
    assert [m.name for m in lora_target_modules(model, ("v_proj", "up_proj"))] == ["qkv_proj", "gate_up_proj"]
    # peft's all-linear on Phi-3: qkv, o, gate_up, down.
    all_linear = qkv + 16 * (3072 + 3072) * 32 + gate_up + 16 * (8192 + 3072) * 32
    assert lora_params(model, 16, ("all-linear",)) == all_linear


def test_fused_gate_up_without_gating_is_rejected() -> None:
    with pytest.raises(InvalidRequestError, match="fused_gate_up"):
        count_params(spec(**SMALL, mlp_gated=False, fused_gate_up=True))


def mixtral_8x7b() -> ModelSpec:
    return spec(
        model_type="mixtral",
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=128,
        vocab_size=32000,
        num_experts=8,
        num_experts_per_token=2,
    )


def test_moe_total_and_active_by_hand() -> None:
    c = count_params(mixtral_8x7b())
    attention = 2 * 4096 * 4096 + 2 * 4096 * 1024
    expert = 3 * 4096 * 14336
    router = 4096 * 8
    assert c.mlp_params_per_layer == 8 * expert + router
    assert c.total_params == 2 * 32000 * 4096 + 32 * (attention + 8 * expert + router + 2 * 4096) + 4096
    assert c.matmul_params_per_token == 32 * (attention + 2 * expert + router) + 32000 * 4096
    # transformers 5 stores Mixtral's experts and router as parameters, which bitsandbytes does not quantize
    assert c.decoder_linear_params == 32 * attention
    assert c.non_linear_params == c.total_params - 32 * attention


def test_moe_linear_modules_and_lora() -> None:
    model = mixtral_8x7b()
    mods = {m.name: m for m in linear_modules(model)}
    assert mods["gate_proj"].count == 32 * 8
    assert (mods["router"].in_features, mods["router"].out_features, mods["router"].count) == (4096, 8, 32)
    assert lora_params(model, 4, ("router",)) == 4 * (4096 + 8) * 32
    assert lora_params(model, 4, ("down_proj",)) == 4 * (14336 + 4096) * 32 * 8


def test_biases_follow_flags() -> None:
    base = count_params(spec(**SMALL))
    o_bias = count_params(spec(**SMALL, o_proj_bias=True))
    mlp_bias = count_params(spec(**SMALL, mlp_bias=True))
    layer_norm = count_params(spec(**SMALL, norm_has_bias=True))
    assert o_bias.total_params - base.total_params == 2 * 64
    assert mlp_bias.total_params - base.total_params == 2 * (128 + 128 + 64)
    assert layer_norm.total_params - base.total_params == 2 * 2 * 64 + 64
    # Biases never change what is quantized.
    assert o_bias.decoder_linear_params == mlp_bias.decoder_linear_params == base.decoder_linear_params


# --- properties ---------------------------------------------------------------------------------


@st.composite
def model_specs(draw: st.DrawFn) -> ModelSpec:
    n_kv = draw(st.integers(1, 8))
    n_q = n_kv * draw(st.integers(1, 8))
    gated = draw(st.booleans())
    experts = draw(st.integers(1, 8))
    return spec(
        hidden_size=draw(st.integers(1, 4096)),
        intermediate_size=draw(st.integers(1, 16384)),
        num_hidden_layers=draw(st.integers(1, 128)),
        num_attention_heads=n_q,
        num_key_value_heads=n_kv,
        head_dim=draw(st.integers(1, 256)),
        vocab_size=draw(st.integers(1, 300_000)),
        tie_word_embeddings=draw(st.booleans()),
        attention_bias=draw(st.booleans()),
        o_proj_bias=draw(st.booleans()),
        mlp_gated=gated,
        mlp_bias=draw(st.booleans()),
        fused_qkv=draw(st.booleans()),
        fused_gate_up=gated and draw(st.booleans()),
        norms_per_layer=draw(st.integers(0, 4)),
        norm_has_bias=draw(st.booleans()),
        num_experts=experts,
        num_experts_per_token=draw(st.integers(1, experts)),
    )


@given(model_specs())
@settings(max_examples=200, deadline=None)
def test_count_grows_with_layers(model: ModelSpec) -> None:
    deeper = model.model_copy(update={"num_hidden_layers": model.num_hidden_layers + 1})
    grown = count_params(deeper).total_params - count_params(model).total_params
    c = count_params(model)
    assert grown == c.attention_params_per_layer + c.mlp_params_per_layer + c.norm_params_per_layer > 0


@given(model_specs())
@settings(max_examples=200, deadline=None)
def test_tying_never_increases_the_count(model: ModelSpec) -> None:
    tied = count_params(model.model_copy(update={"tie_word_embeddings": True}))
    untied = count_params(model.model_copy(update={"tie_word_embeddings": False}))
    assert tied.total_params == untied.total_params - model.vocab_size * model.hidden_size
    assert tied.matmul_params_per_token == untied.matmul_params_per_token


@given(model_specs())
@settings(max_examples=200, deadline=None)
def test_fusion_changes_names_not_counts(model: ModelSpec) -> None:
    unfused = model.model_copy(update={"fused_qkv": False, "fused_gate_up": False})
    assert count_params(model) == count_params(unfused)
    # LoRA on a fused module has one A matrix (r×h) where the separate modules had one each:
    # fused qkv saves 2 of them per layer, fused gate_up 1 per layer and expert.
    h, layers, experts = model.hidden_size, model.num_hidden_layers, model.num_experts
    saved_a = 2 * layers * model.fused_qkv + layers * experts * model.fused_gate_up
    fused_lora = lora_params(model, 8, ("all-linear",))
    assert fused_lora == lora_params(unfused, 8, ("all-linear",)) - 8 * h * saved_a


@given(model_specs())
@settings(max_examples=200, deadline=None)
def test_identities_hold(model: ModelSpec) -> None:
    c = count_params(model)
    assert c.decoder_linear_params + c.non_linear_params == c.total_params
    assert sum(m.weight_params for m in linear_modules(model)) == c.decoder_linear_params
    assert c.matmul_params_per_token <= c.decoder_linear_params + model.vocab_size * model.hidden_size
    if model.num_experts == model.num_experts_per_token:
        assert c.matmul_params_per_token == c.decoder_linear_params + model.vocab_size * model.hidden_size


@given(model_specs(), st.integers(1, 256))
@settings(max_examples=200, deadline=None)
def test_lora_is_linear_in_rank_and_all_linear_is_the_largest(model: ModelSpec, rank: int) -> None:
    every = lora_params(model, rank, ("all-linear",))
    assert lora_params(model, 2 * rank, ("all-linear",)) == 2 * every
    for mod in linear_modules(model):
        assert 0 < lora_params(model, rank, (mod.name,)) <= every
    assert every == sum(lora_params(model, rank, (m.name,)) for m in linear_modules(model))


@given(model_specs())
@settings(max_examples=100, deadline=None)
def test_more_experts_more_params_same_active_experts(model: ModelSpec) -> None:
    more = model.model_copy(update={"num_experts": model.num_experts + 1})
    assert count_params(more).total_params > count_params(model).total_params
    # Active expert weights are unchanged; the router widens by h per layer (dense -> 2 experts
    # adds the whole h·2 router).
    router_growth = model.num_hidden_layers * model.hidden_size * (2 if model.num_experts == 1 else 1)
    active_growth = count_params(more).matmul_params_per_token - count_params(model).matmul_params_per_token
    assert active_growth == router_growth


# --- cross-check against peft (LoRA parameters peft actually creates) ---------------------------


@pytest.mark.parametrize(
    ("fixture", "targets"),
    [
        ("llama3.2-1b", ("all-linear",)),
        ("qwen2.5-0.5b", ("q_proj", "v_proj")),
        ("phi3-mini-4k", ("all-linear",)),
        ("phi3-mini-4k", ("qkv_proj", "o_proj")),
        ("gemma-7b", ("all-linear",)),
    ],
)
def test_lora_params_match_peft_on_meta_device(fixture: str, targets: tuple[str, ...]) -> None:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    peft = pytest.importorskip("peft")
    from autotune.profiles.hf_config import model_spec_from_config

    config = transformers.AutoConfig.from_pretrained(FIXTURES / fixture)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    target_modules: str | list[str] = "all-linear" if targets == ("all-linear",) else list(targets)
    wrapped = peft.get_peft_model(model, peft.LoraConfig(r=16, target_modules=target_modules))
    theirs = sum(p.numel() for p in wrapped.parameters() if p.requires_grad)
    assert lora_params(model_spec_from_config(FIXTURES / fixture), 16, targets) == theirs


@pytest.mark.parametrize(
    "fixture", ["llama3.2-1b", "qwen2.5-0.5b", "phi3-mini-4k", "gemma-7b", "gemma2-9b", "mixtral-8x7b"]
)
def test_a_layer_unit_holds_what_the_decoder_layer_module_holds_on_meta_device(fixture: str) -> None:
    """FSDP's transformer auto-wrap and ZeRO-3 gather a decoder layer (``model.layers[i]``) as one unit: attention,
    MLP and norms; the root unit holds the rest (embeddings, final norm, output head)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from autotune.profiles.hf_config import model_spec_from_config

    config = transformers.AutoConfig.from_pretrained(FIXTURES / fixture)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    layer = sum(p.numel() for p in model.model.layers[0].parameters())
    total = sum(p.numel() for p in model.parameters())
    counts = count_params(model_spec_from_config(FIXTURES / fixture))
    assert (counts.layer_params, counts.root_params) == (layer, total - config.num_hidden_layers * layer)
    assert counts.layer_share == pytest.approx(layer / total, rel=1e-12)
    assert counts.root_share == pytest.approx(1 - config.num_hidden_layers * layer / total, rel=1e-12)
