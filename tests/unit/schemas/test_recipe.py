"""Training recipe by method (plan file, v1 migration, --set, trainer mapping) and the weights a model name names."""

from __future__ import annotations

import json

import pytest
import yaml
from cli_runner import run

from autotune.launcher.overrides import apply_overrides
from autotune.schemas.plan import PLAN_SCHEMA_VERSION, PlanFile, migrate
from autotune.schemas.plan_io import plan_from_yaml, plan_to_yaml
from autotune.schemas.recipe import default_recipe


def _plan(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    code, out, err = run(capsys, "plan", *args, "--json")
    assert code == 0, err
    return json.loads(out)


def test_plan_records_the_method_recipe(capsys: pytest.CaptureFixture[str]) -> None:
    full = _plan(capsys, "llama3-8b", "--gpu", "h100", "--method", "full")["plan_file"]
    lora = _plan(capsys, "llama3-8b", "--gpu", "h100", "--method", "lora")["plan_file"]
    assert full["training"]["learning_rate"] <= 5e-5
    assert lora["training"]["learning_rate"] >= 1e-4
    assert lora["setting"]["lora_dropout"] == 0.0
    assert full["training"]["source"] and lora["training"]["source"]


def test_plan_lora_dropout_is_overridable(capsys: pytest.CaptureFixture[str]) -> None:
    plan = _plan(capsys, "llama3-8b", "--gpu", "h100", "--method", "lora", "--lora-dropout", "0.1")["plan_file"]
    assert plan["setting"]["lora_dropout"] == 0.1


def test_version_1_plan_migrates_to_what_it_ran_and_the_method_recipe(capsys: pytest.CaptureFixture[str]) -> None:
    data = _plan(capsys, "llama3-8b", "--gpu", "h100", "--method", "full")["plan_file"]
    del data["training"]
    data["schema_version"] = 1
    for holder in [data, *data["alternatives"]]:
        del holder["setting"]["adapter_dtype"]
    plan = plan_from_yaml(yaml.safe_dump(data), "old.yaml")
    assert plan.schema_version == PLAN_SCHEMA_VERSION
    assert plan.setting.adapter_dtype == "fp32"  # what peft ran before the plan recorded it
    assert all(alt.setting.adapter_dtype == "fp32" for alt in plan.alternatives)
    assert plan.training == default_recipe("full")
    assert plan_from_yaml(plan_to_yaml(plan), "new.yaml") == plan


@pytest.mark.parametrize("version", [True, 0, -1])
def test_migrate_refuses_versions_never_written(version: object) -> None:
    from autotune.errors import ConfigError

    with pytest.raises(ConfigError):
        migrate({"schema_version": version})


def test_set_method_moves_an_unedited_recipe_and_keeps_an_edited_one(capsys: pytest.CaptureFixture[str]) -> None:
    from autotune.costmodel.estimate import estimate_setting
    from autotune.profiles.catalog import resolve_gpu
    from autotune.schemas.hardware import ClusterSpec

    plan = PlanFile.model_validate(_plan(capsys, "llama3-8b", "--gpu", "h100", "--method", "lora")["plan_file"])

    def estimate(model, cluster: ClusterSpec, workload, setting):  # type: ignore[no-untyped-def]
        return estimate_setting(model, cluster, workload, setting)

    def gpu(key: str):  # type: ignore[no-untyped-def]
        return resolve_gpu(key)[0]

    moved = apply_overrides(plan, ["method=qlora"], estimate=estimate, resolve_gpu=gpu)
    assert moved.training == default_recipe("qlora")
    full = apply_overrides(plan, ["method=full"], estimate=estimate, resolve_gpu=gpu)
    assert full.training.learning_rate == default_recipe("full").learning_rate
    edited = apply_overrides(plan, ["learning_rate=3e-4", "method=full"], estimate=estimate, resolve_gpu=gpu)
    assert edited.training.learning_rate == 3e-4


def test_trainer_takes_the_recipe_unless_the_command_line_names_a_value() -> None:
    from autotune.trainer.optim import choose_optimizer

    recipe = default_recipe("full")
    chosen = choose_optimizer("adamw", recipe).training_arguments()
    assert chosen["learning_rate"] == recipe.learning_rate and chosen["weight_decay"] == recipe.weight_decay
    assert chosen["lr_scheduler_type"] == "cosine" and chosen["max_grad_norm"] == 1.0
    given = choose_optimizer("adamw", recipe, learning_rate=1e-3, warmup_ratio=0.0).training_arguments()
    assert given["learning_rate"] == 1e-3 and given["warmup_steps"] == 0.0


@pytest.mark.parametrize(
    ("name", "weights"),
    [
        ("meta-llama/Meta-Llama-3-8B-Instruct", "meta-llama/Meta-Llama-3-8B-Instruct"),
        ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B-Instruct"),
        ("Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-7B-Instruct"),
        ("Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-7B-Instruct"),
        ("llama3-8b", "meta-llama/Meta-Llama-3-8B"),
        ("meta-llama/Meta-Llama-3-8B", "meta-llama/Meta-Llama-3-8B"),
    ],
)
def test_plan_records_the_weights_the_user_named(capsys: pytest.CaptureFixture[str], name: str, weights: str) -> None:
    data = _plan(capsys, name, "--gpu", "4090")
    assert data["plan_file"]["model_source"] == weights
    shape_notes = [note for note in data["notes"] if "shapes from the catalog entry" in note]
    assert bool(shape_notes) == weights.endswith("Instruct")  # a note exactly when weights and shapes differ
    if shape_notes:
        assert weights in shape_notes[0]
