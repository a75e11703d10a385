"""The analytic LoRA count equals what peft builds through the trainer's own ``apply_method``, per family.

Every catalog family (and the Mixtral MoE family read from config.json) at tiny widths, on the meta device,
under ``all-linear`` (the default targets) and explicit module lists; the MoE dropout override is what the
plan notes say.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from autotune.costmodel.adapter_activations import effective_lora_dropout
from autotune.costmodel.optimizer_step import trainable_tensors
from autotune.costmodel.params import linear_modules, lora_adapters, lora_layout, lora_params
from autotune.errors import InvalidRequestError
from autotune.profiles.catalog import FAMILY_REPRESENTATIVES, resolve_model_profile
from autotune.schemas.lora_targets import lora_dropout_note, peft_target_modules
from autotune.schemas.model import ModelSpec
from autotune.schemas.setting import TrainingSetting

TINY = {
    "hidden_size": 64,
    "intermediate_size": 96,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "vocab_size": 32064,  # Phi-3 pads with id 32000
}
FAMILY_MODELS = FAMILY_REPRESENTATIVES
TARGETS: list[tuple[str, ...]] = [
    ("all-linear",),
    ("q_proj", "v_proj"),
    ("q_proj", "gate_proj", "up_proj", "down_proj"),
]
RANK = 4


def tiny_spec(family: str) -> ModelSpec:
    """The family's architecture at tiny widths; ``mixtral``: 4 experts, 2 per token."""
    if family == "mixtral":
        base = resolve_model_profile("mistral-7b").model_dump()
        moe = {"key": "tiny-mixtral", "model_type": "mixtral", "num_experts": 4, "num_experts_per_token": 2}
        return ModelSpec.model_validate({**base, **TINY, **moe, "decoder_layer_class": "MixtralDecoderLayer"})
    return resolve_model_profile(FAMILY_MODELS[family]).model_copy(update=TINY)


def peft_model(spec: ModelSpec, setting: TrainingSetting) -> Any:
    """The trainer's LoRA model (``apply_method``) of ``spec`` on the meta device."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("peft")
    from transformers import AutoModelForCausalLM

    from autotune.trace.build import config_from_spec
    from autotune.trainer.model import apply_method

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config_from_spec(spec))
    return apply_method(model, setting)


@pytest.mark.parametrize("targets", TARGETS, ids=lambda t: ",".join(t))
@pytest.mark.parametrize("family", [*FAMILY_MODELS, "mixtral"])
def test_analytic_adapters_are_what_peft_builds(family: str, targets: tuple[str, ...]) -> None:
    spec = tiny_spec(family)
    setting = TrainingSetting(method="lora", lora_rank=RANK, lora_targets=targets, lora_dropout=0.05)
    model = peft_model(spec, setting)
    trained = [p for p in model.parameters() if p.requires_grad]
    assert sum(p.numel() for p in trained) == lora_params(spec, RANK, targets)
    assert len(trained) == trainable_tensors(
        spec, setting, modules=linear_modules(spec), lora=lora_layout(spec, setting)
    )
    assert model.peft_config["default"].lora_dropout == effective_lora_dropout(spec, setting)


def test_mixtral_fused_gate_up_adapter_has_double_rank_and_alpha() -> None:
    spec = tiny_spec("mixtral")
    model = peft_model(spec, TrainingSetting(method="lora", lora_rank=RANK, lora_alpha=8))
    wrappers = {name.rsplit(".", 1)[-1] if "base_layer" not in name else "gate_up": m for name, m in _wrappers(model)}
    gate_up = wrappers["gate_up"]
    assert (gate_up.parameter_name, gate_up.r["default"], gate_up.lora_alpha["default"]) == ("gate_up_proj", 8, 16)
    assert gate_up.scaling["default"] == 2.0  # alpha / r unchanged
    adapters = {a.name: a for a in lora_adapters(spec, RANK, ("all-linear",))}
    assert adapters["gate_up_proj"].rank == 2 * RANK
    assert tuple(gate_up.lora_A["default"].weight.shape) == (2 * RANK * 4, 64)  # (rank·E, h)
    assert tuple(gate_up.lora_B["default"].weight.shape) == (2 * 96, 2 * RANK * 4)  # (2I, rank·E)


def _wrappers(model: Any) -> list[tuple[str, Any]]:
    from peft.tuners.lora.layer import ParamWrapper

    return [(n, m) for n, m in model.named_modules() if isinstance(m, ParamWrapper) and ".layers.0." in n]


def test_mixtral_half_of_a_fused_pair_is_refused_by_plan_and_trainer() -> None:
    from autotune.errors import ConfigError

    spec = tiny_spec("mixtral")
    with pytest.raises(InvalidRequestError, match="gate_up_proj"):
        lora_params(spec, RANK, ("q_proj", "gate_proj"))
    with pytest.raises(ConfigError, match="gate_up_proj"):
        peft_model(spec, TrainingSetting(method="lora", lora_targets=("q_proj", "gate_proj")))


def test_mixtral_plan_names_reach_peft_as_its_moe_names() -> None:
    assert peft_target_modules("mixtral", ("q_proj", "gate_up_proj", "router")) == ["q_proj", "w1", "w3", "gate"]
    assert peft_target_modules("llama", ("q_proj", "gate_proj")) == ["q_proj", "gate_proj"]
    assert peft_target_modules("mixtral", ("all-linear",)) == "all-linear"


def test_dropout_note_says_what_the_trainer_runs(caplog: pytest.LogCaptureFixture) -> None:
    spec = tiny_spec("mixtral")
    attention_only = TrainingSetting(method="lora", lora_targets=("q_proj", "v_proj"), lora_dropout=0.1)
    router = attention_only.model_copy(update={"lora_targets": ("q_proj", "router")})
    assert lora_dropout_note("mixtral", attention_only.lora_targets, 0.1) is None
    note = lora_dropout_note("mixtral", router.lora_targets, 0.1)
    assert note is not None and "0.1 -> 0" in note and "router" in note
    assert lora_dropout_note("llama", ("all-linear",), 0.1) is None
    with caplog.at_level(logging.WARNING, logger="autotune.trainer"):
        assert peft_model(spec, router).peft_config["default"].lora_dropout == 0.0
        assert peft_model(spec, attention_only).peft_config["default"].lora_dropout == 0.1
    assert "lora_dropout 0.10 -> 0" in caplog.text


@pytest.mark.parametrize("adapter_dtype", ["fp32", "compute"])
def test_wrapped_expert_memory_is_what_the_trace_keeps(adapter_dtype: str) -> None:
    """Saved activations of LoRA on all-linear minus on the attention projections only: the merged expert
    weights, factor copies and newly saved inputs (``autotune.costmodel.param_adapters``), traced."""
    pytest.importorskip("torch")
    from autotune.costmodel.param_adapters import merged_weight_bytes_per_layer, wrapped_input_bytes_per_token
    from autotune.costmodel.precision import dtype_bytes
    from autotune.profiles.catalog import resolve_gpu
    from autotune.schemas.hardware import ClusterSpec
    from autotune.trace import trace_training_step

    spec = tiny_spec("mixtral").model_copy(update={"hidden_size": 256, "intermediate_size": 512, "vocab_size": 256})
    cluster = ClusterSpec(gpu=resolve_gpu("h100")[0], host_memory_gib_per_node=160)
    seq_len = 256
    traced: list[float] = []
    for targets in (("all-linear",), ("q_proj", "k_proj", "v_proj", "o_proj")):
        setting = TrainingSetting(
            method="lora", grad_ckpt=False, lora_targets=targets, lora_dropout=0.0, adapter_dtype=adapter_dtype
        )
        report = trace_training_step(spec, setting, seq_len, cluster)
        traced.append(report.phases[0].categories_bytes["saved activations"])
    wrapped = TrainingSetting(method="lora", grad_ckpt=False, lora_dropout=0.0, adapter_dtype=adapter_dtype)
    dtypes = dtype_bytes(wrapped, cluster.gpu)
    per_layer = merged_weight_bytes_per_layer(spec, wrapped, dtypes, lora_layout(spec, wrapped))
    per_layer += wrapped_input_bytes_per_token(spec, wrapped, dtypes, lora_layout(spec, wrapped)) * seq_len
    merged_experts = 4 * 256 * 512 * 3 * 2  # E·3·h·I in bf16 per layer
    assert per_layer > merged_experts
    assert abs(spec.num_hidden_layers * per_layer - (traced[0] - traced[1])) <= 0.005 * (traced[0] - traced[1])


def test_plan_and_estimate_state_the_moe_dropout_override(capsys: pytest.CaptureFixture[str]) -> None:
    import json
    from pathlib import Path

    from cli_runner import run

    config = str(Path(__file__).parent.parent.parent / "fixtures" / "configs" / "mixtral-8x7b" / "config.json")
    common = ["--gpu", "h100", "--num-gpus", "8", "--seq-len", "1024", "--method", "lora", "--json"]
    asked = ["--lora-dropout", "0.05"]  # the default is 0; a plan asked for 0.05 records and notes the 0 that runs
    for command, stated, extra in (("plan", "LoRA dropout 0 for", asked), ("estimate", "LoRA dropout 0 for", [])):
        code, out, err = run(capsys, command, config, *common, *extra)
        assert code == 0, err
        data = json.loads(out)
        notes = [note for note in data["notes"] if "dropout" in note]
        assert len(notes) == 1 and notes[0].startswith(stated)
        if command == "plan":  # the plan file records the dropout that runs
            assert data["plan_file"]["setting"]["lora_dropout"] == 0.0
            assert all(alt["setting"]["lora_dropout"] == 0.0 for alt in data["plan_file"]["alternatives"])
    code, out, err = run(capsys, "estimate", config, *common, "--lora-targets", "q_proj,v_proj")
    assert code == 0, err
    assert not [note for note in json.loads(out)["notes"] if "dropout" in note]
