"""LoRA targets may be given by the model's own module names (Falcon's ``query_key_value``, Phi-2's ``fc1``) or by
the plan's Llama-style names; the cost model counts both alike and the trainer hands peft the names the model
really has (a plan name peft cannot find once failed only at launch, after the run directory existed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from autotune.costmodel.params import linear_modules, lora_params
from autotune.errors import InvalidRequestError
from autotune.profiles.hf_config import model_spec_from_config
from autotune.schemas.lora_targets import MODULE_NAMES, module_name, peft_target_modules, plan_module_name
from autotune.schemas.model import ModelSpec
from autotune.schemas.setting import TrainingSetting

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "configs"
TINY_MPT = {"model_type": "mpt", "d_model": 64, "n_heads": 4, "n_layers": 2, "expansion_ratio": 4, "vocab_size": 128}
GENERIC_FIXTURES = ["falcon-7b", "falcon-40b", "pythia-160m", "bloom-560m", "phi-2", "stablelm-2-1_6b", "phi3-mini-4k"]
RANK = 4


def _config_path(name: str, tmp_path: Path) -> Path:
    if name != "mpt":
        return FIXTURES / name / "config.json"
    path = tmp_path / "mpt" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(TINY_MPT))
    return path


def _meta_model(path: Path) -> Any:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    config = transformers.AutoConfig.from_pretrained(path.parent, trust_remote_code=False)
    for layers in ("num_hidden_layers", "n_layer", "n_layers"):  # one block is enough to read the names
        if hasattr(config, layers):
            setattr(config, layers, 1)
    with torch.device("meta"):
        return transformers.AutoModelForCausalLM.from_config(config)


def _own_linear_names(model: Any) -> set[str]:
    import torch

    return {
        name.rsplit(".", 1)[-1]
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.Linear) and not name.endswith("lm_head")
    }


@pytest.mark.parametrize("name", [*GENERIC_FIXTURES, "mpt"])
def test_module_names_are_the_ones_transformers_builds(name: str, tmp_path: Path) -> None:
    path = _config_path(name, tmp_path)
    spec = model_spec_from_config(path)
    own = {module_name(spec.model_type, module.name) for module in linear_modules(spec)}
    assert own == _own_linear_names(_meta_model(path))


def _own_targets(spec: ModelSpec) -> tuple[str, ...]:
    """Every linear but the first, by the model's own names (an explicit list, not all-linear)."""
    return tuple(module_name(spec.model_type, module.name) for module in linear_modules(spec)[1:])


@pytest.mark.parametrize("name", [*GENERIC_FIXTURES, "mpt"])
def test_own_and_plan_names_count_alike_and_train_what_peft_builds(name: str, tmp_path: Path) -> None:
    pytest.importorskip("peft")
    from autotune.trainer.model import apply_method

    path = _config_path(name, tmp_path)
    spec = model_spec_from_config(path)
    own = _own_targets(spec)
    plan = tuple(plan_module_name(spec.model_type, target) for target in own)
    assert lora_params(spec, RANK, own) == lora_params(spec, RANK, plan)
    counted = lora_params(spec.model_copy(update={"num_hidden_layers": 1}), RANK, own)
    for targets in (own, plan):
        setting = TrainingSetting(method="lora", lora_rank=RANK, lora_targets=targets, lora_dropout=0.0)
        model = apply_method(_meta_model(path), setting)
        assert sum(p.numel() for p in model.parameters() if p.requires_grad) == counted


def test_falcon_split_projection_names_reach_peft_as_the_fused_module() -> None:
    assert peft_target_modules("falcon", ("q_proj", "v_proj", "dense")) == ["query_key_value", "dense"]
    assert peft_target_modules("gpt_neox", ("qkv_proj", "down_proj")) == ["query_key_value", "dense_4h_to_h"]
    assert peft_target_modules("phi", ("q_proj", "o_proj", "fc1")) == ["q_proj", "dense", "fc1"]
    assert peft_target_modules("llama", ("q_proj", "o_proj")) == ["q_proj", "o_proj"]


def test_a_name_from_another_family_is_refused_with_the_models_own_names() -> None:
    spec = model_spec_from_config(FIXTURES / "falcon-7b" / "config.json")
    with pytest.raises(InvalidRequestError) as error:
        lora_params(spec, RANK, ("c_attn",))
    message = str(error.value)
    assert "'c_attn'" in message and "query_key_value (qkv_proj)" in message and "dense_4h_to_h (down_proj)" in message


def test_every_renamed_family_maps_one_to_one() -> None:
    for model_type, names in MODULE_NAMES.items():
        assert len(set(names.values())) == len(names), model_type
        for plan_name, own in names.items():
            assert plan_module_name(model_type, own) == plan_name
