"""The GPU and model catalogs: every YAML loads, names resolve, values match the cited facts."""

from __future__ import annotations

import ast
import re
from importlib import resources
from pathlib import Path

import pytest

from autotune.errors import AutotuneError, UnknownNameError
from autotune.profiles.catalog import (
    AMBIGUOUS_GPU_NAMES,
    MODEL_ALIASES,
    _build_index,
    list_gpus,
    list_models,
    load_profile_dir,
    normalize_name,
    resolve_gpu,
    resolve_model_profile,
)
from autotune.schemas.hardware import GpuSpec
from autotune.schemas.model import ModelSpec

REQUIRED_GPUS = {
    "rtx-3090", "rtx-4090", "rx-7900-xtx", "rtx-a6000", "rtx-6000-ada", "rtx-pro-6000", "a10g", "l4",
    "l40s", "t4", "v100-16gb", "v100-32gb", "a100-40gb", "a100-80gb", "h100-80gb", "h100-pcie", "h200",
    "mi300x", "b200", "gh200",
}  # fmt: skip
REQUIRED_MODELS = {
    "llama-7b", "llama-13b", "llama-30b", "llama-65b", "llama2-7b", "llama2-13b", "llama2-70b",
    "llama3-8b", "llama3-70b", "llama3.1-8b", "llama3.1-70b", "llama3.1-405b", "llama3.2-1b",
    "llama3.2-3b", "gemma-2b", "gemma-7b", "gemma2-2b", "gemma2-9b", "gemma2-27b", "phi3-mini",
    "phi3-medium", "mistral-7b", "mistral-7b-v0.3", "qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-3b",
    "qwen2.5-7b", "qwen2.5-14b", "qwen2.5-32b", "qwen2.5-72b",
}  # fmt: skip

PROFILES = resources.files("autotune.profiles")


def _yaml_stems(kind: str) -> list[str]:
    return sorted(p.name[: -len(".yaml")] for p in (PROFILES / kind).iterdir() if p.name.endswith(".yaml"))


# ---- loading -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "schema"), [("gpus", GpuSpec), ("models", ModelSpec)])
def test_every_yaml_loads_and_its_key_is_its_file_name(kind: str, schema: type) -> None:
    stems = _yaml_stems(kind)
    specs = load_profile_dir(PROFILES / kind, schema)
    assert [spec.key for spec in specs] == stems
    assert all(isinstance(spec, schema) for spec in specs)


def test_required_keys_exist() -> None:
    assert {gpu.key for gpu in list_gpus()} >= REQUIRED_GPUS
    assert {model.key for model in list_models()} >= REQUIRED_MODELS


def test_lists_are_sorted_by_key() -> None:
    gpu_keys = [gpu.key for gpu in list_gpus()]
    model_keys = [model.key for model in list_models()]
    assert gpu_keys == sorted(gpu_keys)
    assert model_keys == sorted(model_keys)


def _write(directory: Path, name: str, text: str) -> None:
    (directory / name).write_text(text, encoding="utf-8")


def test_key_differing_from_file_name_is_an_error_naming_the_file(tmp_path: Path) -> None:
    text = (PROFILES / "gpus" / "l4.yaml").read_text(encoding="utf-8")
    _write(tmp_path, "l4-copy.yaml", text)
    with pytest.raises(ValueError, match=r"l4-copy\.yaml.*key 'l4'"):
        load_profile_dir(tmp_path, GpuSpec)


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("memory_gib: 24", "memory_gib: -24", "memory_gib"),
        ("tdp_w: 72", "tdp_w: 72\nboost_clock_mhz: 2040", "boost_clock_mhz"),
        ("vendor: nvidia", "vendor: [nvidia", "not valid YAML"),
    ],
)
def test_invalid_profile_is_an_error_naming_the_file(tmp_path: Path, old: str, new: str, message: str) -> None:
    text = (PROFILES / "gpus" / "l4.yaml").read_text(encoding="utf-8")
    assert old in text
    _write(tmp_path, "l4.yaml", text.replace(old, new))
    with pytest.raises(ValueError, match=rf"(?s)l4\.yaml.*{message}"):
        load_profile_dir(tmp_path, GpuSpec)


def test_non_yaml_files_are_ignored(tmp_path: Path) -> None:
    _write(tmp_path, "l4.yaml", (PROFILES / "gpus" / "l4.yaml").read_text(encoding="utf-8"))
    _write(tmp_path, "README.md", "not a profile")
    assert [spec.key for spec in load_profile_dir(tmp_path, GpuSpec)] == ["l4"]


# ---- provenance ----------------------------------------------------------------------------------

CITATION = re.compile(r"https?://\S+|\S+:\S+@[0-9a-f]{7,40}")


@pytest.mark.parametrize("gpu", list_gpus(), ids=lambda gpu: gpu.key)
def test_each_gpu_cites_sources_and_lists_only_real_unconfirmed_fields(gpu: GpuSpec) -> None:
    assert CITATION.search(gpu.source), gpu.source
    assert set(gpu.unconfirmed) <= set(GpuSpec.model_fields)
    for field in gpu.unconfirmed:  # the notes say how each unconfirmed value was derived
        assert field.removesuffix("_gb_per_s").removesuffix("_tflops") in gpu.notes, field


@pytest.mark.parametrize("model", list_models(), ids=lambda model: model.key)
def test_each_model_cites_sources(model: ModelSpec) -> None:
    assert CITATION.search(model.source), model.source


# ---- GPU values against the datasheets and tables each profile's source cites ----------------------

GPU_FACTS = [
    # (key, field, value) — facts table dense rates, bandwidths and TDPs.
    ("h100-80gb", "bf16_tflops", 989.0),
    ("h100-80gb", "tf32_tflops", 494.5),
    ("h100-80gb", "memory_bandwidth_gb_per_s", 3350.0),
    ("h100-pcie", "bf16_tflops", 756.0),
    ("h100-pcie", "memory_bandwidth_gb_per_s", 2000.0),
    (
        "h200",
        "memory_gib",
        140.4,
    ),  # the driver's 143,771 MiB on autotune's own H200 run (measurements/autotune-core-h200)
    ("h200", "memory_bandwidth_gb_per_s", 4800.0),
    ("b200", "bf16_tflops", 2250.0),
    ("b200", "tf32_tflops", 1125.0),
    ("b200", "memory_bandwidth_gb_per_s", 8000.0),
    ("b200", "memory_gib", 180.0),
    ("gh200", "memory_gib", 96.0),
    ("gh200", "memory_bandwidth_gb_per_s", 4000.0),
    ("gh200", "bf16_tflops", 989.0),
    ("rtx-4090", "bf16_tflops", 165.2),
    ("rtx-4090", "fp16_tflops", 165.2),
    ("rtx-4090", "fp32_tflops", 82.6),
    ("rtx-4090", "memory_gib", 24.0),
    ("rtx-3090", "bf16_tflops", 71.0),
    ("rtx-a6000", "bf16_tflops", 154.8),
    ("rtx-a6000", "gpu_link_gb_per_s", 56.25),
    ("rtx-6000-ada", "bf16_tflops", 364.25),
    ("rtx-pro-6000", "bf16_tflops", 500.0),
    ("rtx-pro-6000", "memory_gib", 96.0),
    ("rx-7900-xtx", "fp16_tflops", 122.8),
    ("rx-7900-xtx", "fp32_tflops", 61.4),
    ("a10g", "bf16_tflops", 70.0),
    ("l4", "bf16_tflops", 121.0),
    ("l40s", "bf16_tflops", 362.0),
    ("l40s", "tdp_w", 350.0),
    ("t4", "fp16_tflops", 65.0),
    ("t4", "bf16_tflops", None),
    ("v100-32gb", "fp16_tflops", 125.0),
    ("v100-32gb", "tf32_tflops", None),
    ("a100-40gb", "memory_bandwidth_gb_per_s", 1555.0),
    ("a100-80gb", "memory_bandwidth_gb_per_s", 2039.0),
    ("a100-80gb", "gpu_link_gb_per_s", 300.0),
    ("mi300x", "bf16_tflops", 1307.4),
    ("mi300x", "gpu_link_gb_per_s", 448.0),
    ("mi300x", "supports_bitsandbytes", False),
    ("rx-7900-xtx", "supports_bitsandbytes", False),
    ("rx-7900-xtx", "supports_flash_attention", False),
    ("v100-16gb", "supports_bf16", False),
    ("v100-16gb", "supports_flash_attention", True),
    ("h100-pcie", "gpu_link_gb_per_s", None),
]


@pytest.mark.parametrize(("key", "field", "expected"), GPU_FACTS)
def test_gpu_values_match_facts(key: str, field: str, expected: object) -> None:
    gpu, _ = resolve_gpu(key)
    assert getattr(gpu, field) == expected


def test_marketed_capacity_is_read_as_gib() -> None:
    """memory_gib is the marketed GB figure read as GiB, not the facts' nominal decimal conversion."""
    marketed_gb = {"rtx-4090": 24, "a100-40gb": 40, "a100-80gb": 80, "h100-80gb": 80, "mi300x": 192, "t4": 16}
    for key, gb in marketed_gb.items():
        assert resolve_gpu(key)[0].memory_gib == gb


PCIE_GB_PER_S = {"PCIe 3.0 x16": 16.0, "PCIe 4.0 x16": 31.0, "PCIe 5.0 x16": 63.0}


@pytest.mark.parametrize("gpu", list_gpus(), ids=lambda gpu: gpu.key)
def test_gpu_fields_are_consistent(gpu: GpuSpec) -> None:
    assert gpu.host_link_gb_per_s == PCIE_GB_PER_S[gpu.host_link]
    assert (gpu.gpu_link is None) == (gpu.gpu_link_gb_per_s is None)
    assert (gpu.bf16_tflops is None) == (not gpu.supports_bf16)
    assert gpu.supports_bitsandbytes == (gpu.vendor == "nvidia")
    if gpu.tf32_tflops is not None:
        assert gpu.tf32_tflops >= gpu.fp32_tflops
    assert gpu.fp16_tflops > gpu.fp32_tflops  # a tensor rate above the non-tensor rate


# ---- model values against the config.json shapes each profile's source cites ----------------------

# Exact totals counted from each model's config.json shapes by the rule of _counted_param_count below.
COUNTED_PARAMS = {
    "llama-7b": 6_738_415_616,
    "llama-13b": 13_015_864_320,
    "llama-30b": 32_528_943_616,
    "llama-65b": 65_285_660_672,
    "llama2-7b": 6_738_415_616,
    "llama2-13b": 13_015_864_320,
    "llama2-70b": 68_976_648_192,
    "llama3-8b": 8_030_261_248,
    "llama3-70b": 70_553_706_496,
    "llama3.1-8b": 8_030_261_248,
    "llama3.1-70b": 70_553_706_496,
    "llama3.1-405b": 405_853_388_800,
    "llama3.2-1b": 1_235_814_400,
    "llama3.2-3b": 3_212_749_824,
    "gemma-2b": 2_506_172_416,
    "gemma-7b": 8_537_680_896,
    "gemma2-2b": 2_614_341_888,
    "gemma2-9b": 9_241_705_984,
    "gemma2-27b": 27_227_128_320,
    "phi3-mini": 3_821_079_552,
    "phi3-medium": 13_960_238_080,
    "mistral-7b": 7_241_732_096,
    "mistral-7b-v0.3": 7_248_023_552,
    "qwen2.5-0.5b": 494_032_768,
    "qwen2.5-1.5b": 1_543_714_304,
    "qwen2.5-3b": 3_085_938_688,
    "qwen2.5-7b": 7_615_616_512,
    "qwen2.5-14b": 14_770_033_664,
    "qwen2.5-32b": 32_763_876_352,
    "qwen2.5-72b": 72_706_203_648,
}


def _counted_param_count(m: ModelSpec) -> int:
    """The counting rule (q/k/v/o, optional q/k/v bias, gated MLP, k norms, embeddings)."""
    per_layer = 2 * m.hidden_size * m.q_dim + 2 * m.hidden_size * m.kv_dim
    if m.attention_bias:
        per_layer += m.q_dim + 2 * m.kv_dim
    per_layer += 3 * m.hidden_size * m.intermediate_size + m.norms_per_layer * m.hidden_size
    embedding = m.vocab_size * m.hidden_size
    head = 0 if m.tie_word_embeddings else embedding
    return embedding + m.num_hidden_layers * per_layer + m.hidden_size + head


def test_every_model_has_a_counted_figure() -> None:
    assert set(COUNTED_PARAMS) == {model.key for model in list_models()}


@pytest.mark.parametrize("model", list_models(), ids=lambda model: model.key)
def test_model_shapes_reproduce_the_counted_parameter_count(model: ModelSpec) -> None:
    assert _counted_param_count(model) == COUNTED_PARAMS[model.key]


DECODER_LAYER_CLASS = {
    "llama": "LlamaDecoderLayer",
    "mistral": "MistralDecoderLayer",
    "qwen2": "Qwen2DecoderLayer",
    "gemma": "GemmaDecoderLayer",
    "gemma2": "Gemma2DecoderLayer",
    "phi3": "Phi3DecoderLayer",
}


@pytest.mark.parametrize("model", list_models(), ids=lambda model: model.key)
def test_model_family_fields(model: ModelSpec) -> None:
    assert model.decoder_layer_class == DECODER_LAYER_CLASS[model.model_type]
    assert model.attention_bias == (model.model_type == "qwen2")
    assert model.norms_per_layer == (4 if model.model_type == "gemma2" else 2)
    assert model.final_logit_softcapping == (30.0 if model.model_type == "gemma2" else None)
    assert model.fused_qkv == model.fused_gate_up == (model.model_type == "phi3")
    assert model.hidden_act == {"gemma": "gelu", "gemma2": "gelu_pytorch_tanh"}.get(model.model_type, "silu")
    assert model.params_published


MODEL_FACTS = [
    ("llama3-8b", "vocab_size", 128256),
    ("llama3-8b", "num_key_value_heads", 8),
    ("llama2-7b", "max_position_embeddings", 4096),
    ("llama3.2-1b", "head_dim", 64),
    ("llama3.2-1b", "tie_word_embeddings", True),
    ("gemma-7b", "head_dim", 256),
    ("gemma2-27b", "head_dim", 128),
    ("mistral-7b", "vocab_size", 32000),
    ("mistral-7b-v0.3", "vocab_size", 32768),
    ("phi3-mini", "vocab_size", 32064),
    ("qwen2.5-7b", "vocab_size", 152064),
    ("qwen2.5-3b", "tie_word_embeddings", True),
    ("qwen2.5-32b", "params_published", "32.5B"),
    ("qwen2.5-0.5b", "hf_repo_id", "Qwen/Qwen2.5-0.5B"),
    ("llama-7b", "hf_repo_id", None),
]


@pytest.mark.parametrize(("key", "field", "expected"), MODEL_FACTS)
def test_model_values_match_facts(key: str, field: str, expected: object) -> None:
    assert getattr(resolve_model_profile(key), field) == expected


# ---- name resolution ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("typed", "key"),
    [
        ("rtx-4090", "rtx-4090"),
        ("RTX 4090", "rtx-4090"),
        ("rtx4090", "rtx-4090"),
        ("rtx_4090", "rtx-4090"),
        ("4090", "rtx-4090"),
        ("geforce rtx 4090", "rtx-4090"),
        ("NVIDIA GeForce RTX 4090", "rtx-4090"),
        ("3090", "rtx-3090"),
        ("7900xtx", "rx-7900-xtx"),
        ("Radeon RX 7900 XTX", "rx-7900-xtx"),
        ("a6000", "rtx-a6000"),
        ("h100-sxm", "h100-80gb"),
        ("NVIDIA H100 80GB HBM3", "h100-80gb"),
        ("H100 PCIe", "h100-pcie"),
        ("pro6000", "rtx-pro-6000"),
        ("rtx pro 6000", "rtx-pro-6000"),
        ("mi300", "mi300x"),
        ("a100-80", "a100-80gb"),
        ("NVIDIA A100-SXM4-40GB", "a100-40gb"),
        ("Tesla T4", "t4"),
        ("Tesla V100-SXM2-32GB", "v100-32gb"),
        ("  L40S ", "l40s"),
    ],
)
def test_resolve_gpu_spellings(typed: str, key: str) -> None:
    gpu, note = resolve_gpu(typed)
    assert gpu.key == key
    assert note is None


@pytest.mark.parametrize(
    ("typed", "key", "other"),
    [
        ("a100", "a100-80gb", "a100-40gb"),
        ("H100", "h100-80gb", "h100-pcie"),
        ("v100", "v100-16gb", "v100-32gb"),
    ],
)
def test_ambiguous_gpu_names_resolve_with_a_note(typed: str, key: str, other: str) -> None:
    gpu, note = resolve_gpu(typed)
    assert gpu.key == key
    assert note is not None
    assert note.startswith(f"'{typed}' taken as {key}")
    assert other in note
    assert "\n" not in note


def test_a100_note_text() -> None:
    assert resolve_gpu("a100")[1] == "'a100' taken as a100-80gb; use a100-40gb for the 40 GB card"


@pytest.mark.parametrize(
    ("typed", "suggested"),
    [("rtx4080", "rtx-4090"), ("a10", "a10g"), ("l40", "l40s"), ("h300", "h200")],
)
def test_unknown_gpu_suggests_close_names(typed: str, suggested: str) -> None:
    with pytest.raises(UnknownNameError) as info:
        resolve_gpu(typed)
    message = str(info.value)
    assert isinstance(info.value, AutotuneError)
    assert message.startswith(f"unknown GPU '{typed}': closest are ")
    closest = message.split("closest are ", 1)[1].split(" (", 1)[0].split(", ")
    assert suggested in closest
    assert 1 <= len(closest) <= 3
    assert "\n" not in message
    assert "autotune gpus" in message


@pytest.mark.parametrize("typed", ["zzzz", "", "   "])
def test_unknown_gpu_without_close_names(typed: str) -> None:
    with pytest.raises(UnknownNameError, match="autotune gpus lists all"):
        resolve_gpu(typed)


@pytest.mark.parametrize(
    ("typed", "key"),
    [
        ("llama3-8b", "llama3-8b"),
        ("meta-llama/Meta-Llama-3-8B", "llama3-8b"),
        ("Meta-Llama-3-8B-Instruct", "llama3-8b"),
        ("llama-3-8b", "llama3-8b"),
        ("Llama3-8B", "llama3-8b"),
        ("meta-llama/Llama-3.1-8B-Instruct", "llama3.1-8b"),
        ("Llama 3.2 1B", "llama3.2-1b"),
        ("meta-llama/Llama-2-7b-chat-hf", "llama2-7b"),
        ("decapoda-research/llama-30b-hf", "llama-30b"),
        ("llama-33b", "llama-30b"),
        ("phi-3-mini", "phi3-mini"),
        ("microsoft/Phi-3-mini-4k-instruct", "phi3-mini"),
        ("mistral-7b-v0.1", "mistral-7b"),
        ("mistralai/Mistral-7B-Instruct-v0.3", "mistral-7b-v0.3"),
        ("google/gemma-2-9b-it", "gemma2-9b"),
        ("gemma-7b-it", "gemma-7b"),
        ("qwen2.5-7b-instruct", "qwen2.5-7b"),
        ("Qwen/Qwen2.5-0.5B-Instruct", "qwen2.5-0.5b"),
    ],
)
def test_resolve_model_spellings(typed: str, key: str) -> None:
    assert resolve_model_profile(typed).key == key


def test_similar_model_names_stay_distinct() -> None:
    assert resolve_model_profile("gemma-2b").key == "gemma-2b"
    assert resolve_model_profile("gemma-2-2b").key == "gemma2-2b"
    assert resolve_model_profile("llama-7b").key == "llama-7b"
    assert resolve_model_profile("llama-2-7b").key == "llama2-7b"
    assert resolve_model_profile("qwen2.5-3b").key == "qwen2.5-3b"
    assert resolve_model_profile("qwen2.5-32b").key == "qwen2.5-32b"


@pytest.mark.parametrize(("typed", "suggested"), [("llama4-8b", "llama3-8b"), ("mistral-7b-v0.2", "mistral-7b")])
def test_unknown_model_suggests_close_names_and_config_path(typed: str, suggested: str) -> None:
    with pytest.raises(UnknownNameError) as info:
        resolve_model_profile(typed)
    message = str(info.value)
    assert message.startswith(f"unknown model '{typed}': closest are ")
    assert suggested in message.split("closest are ", 1)[1]
    assert "config.json" in message
    assert "\n" not in message


def test_no_two_entries_share_a_name() -> None:
    """Keys, aliases, repo ids and short names map to one entry each after normalization."""
    for names_by_key in (
        {gpu.key: [gpu.key, *gpu.aliases] for gpu in list_gpus()},
        {
            m.key: [m.key, *([m.hf_repo_id] if m.hf_repo_id else []), *MODEL_ALIASES.get(m.key, ())]
            for m in list_models()
        },
    ):
        owner: dict[str, str] = {}
        for key, names in names_by_key.items():
            for name in names:
                assert owner.setdefault(normalize_name(name), key) == key, (
                    name,
                    key,
                    owner[normalize_name(name)],
                )
    gpu_names = {normalize_name(n) for gpu in list_gpus() for n in (gpu.key, *gpu.aliases)}
    assert not gpu_names & set(AMBIGUOUS_GPU_NAMES)


def test_a_name_claimed_by_two_entries_is_an_error() -> None:
    with pytest.raises(ValueError, match="'RTX 4090' of b is also a name of a"):
        _build_index([("a", ["rtx-4090"]), ("b", ["RTX 4090"])], "GPU")


def test_every_name_resolves_to_its_own_entry() -> None:
    for gpu in list_gpus():
        for name in (gpu.key, *gpu.aliases):
            assert resolve_gpu(name) == (gpu, None)
    for model in list_models():
        for name in (model.key, *MODEL_ALIASES.get(model.key, ())):
            assert resolve_model_profile(name) == model
        if model.hf_repo_id:
            assert resolve_model_profile(model.hf_repo_id) == model


# ---- one home per GPU fact -----------------------------------------------------------------------

SRC = Path(__file__).parents[3] / "src" / "autotune"
CATALOG_MODULE = SRC / "profiles" / "catalog.py"


def gpu_key_literals(path: Path, keys: set[str]) -> list[tuple[int, str]]:
    """(line, key) of each string literal in a Python file that is exactly a GPU catalog key."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in keys
    ]


def test_gpu_key_literal_finder_finds_one(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text('"""Doc naming h100-80gb in words."""\nCARDS = ("h100-80gb", f"{x}")\nNOTE = "l4 is small"\n')
    assert gpu_key_literals(module, {"h100-80gb", "l4"}) == [(2, "h100-80gb")]


def test_no_module_but_the_catalog_names_a_gpu_key() -> None:
    """A GPU's facts (current, SkyPilot names, ...) live in its profile: code reads them, never lists GPU keys."""
    keys = {gpu.key for gpu in list_gpus()}
    found = {
        f"{path.relative_to(SRC)}:{line} {key}"
        for path in sorted(SRC.rglob("*.py"))
        if path != CATALOG_MODULE
        for line, key in gpu_key_literals(path, keys)
    }
    assert not found
