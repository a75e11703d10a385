"""The TrainingArguments of a plan and a command line (``trainer/hf_args.py``), built in-process on the CPU.

The contract: the plan's micro batch size, accumulation, precision switches and recipe reach the arguments; the
command line's steps, evaluation, saving and seed too; the optimizer stepped in the backward turns clipping off;
FSDP plans get FSDP's own settings unless ``accelerate launch`` set them; a ZeRO plan without its DeepSpeed JSON, a
JSON that is not there, a JSON for a plan without ZeRO and the chunked loss with sharded parameters are refused in
one line before anything loads. (The DeepSpeed and accelerate round trips are tests/unit/launcher/
test_installed_backends.py's.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("transformers")

from plans import make_plan

from autotune.errors import ConfigError
from autotune.schemas.plan import PlanFile
from autotune.trainer.args import TrainerArgs
from autotune.trainer.hf_args import SAVE_TOTAL_LIMIT, build_training_arguments, fsdp_arguments
from autotune.trainer.model import choose_precision


@pytest.fixture(autouse=True)
def _no_accelerate_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ACCELERATE_USE_FSDP", "ACCELERATE_USE_DEEPSPEED", "ACCELERATE_DEEPSPEED_ZERO_STAGE"):
        monkeypatch.delenv(name, raising=False)  # TrainingArguments may set them; restored after the test


def _args(tmp_path: Path, **values: Any) -> TrainerArgs:
    return TrainerArgs(plan_path=tmp_path / "plan.yaml", dataset="d", output_dir=str(tmp_path), cpu=True, **values)


def _build(plan: PlanFile, args: TrainerArgs) -> Any:
    return build_training_arguments(plan, args, choose_precision(plan.setting, True))


def test_the_plan_and_the_command_line_reach_the_arguments(tmp_path: Path) -> None:
    plan = make_plan(micro_batch_size=3, grad_accum=5, precision="fp32")
    built = _build(
        plan, _args(tmp_path, max_steps=7, eval_steps=2, eval_fraction=0.1, save_steps=4, seed=11, learning_rate=3e-4)
    )
    assert (built.per_device_train_batch_size, built.gradient_accumulation_steps) == (3, 5)
    assert built.per_device_eval_batch_size == 3
    assert (built.max_steps, built.eval_strategy.value, built.eval_steps) == (7, "steps", 2)
    assert (built.save_steps, built.save_total_limit, built.seed, built.data_seed) == (4, SAVE_TOTAL_LIMIT, 11, 11)
    assert built.learning_rate == 3e-4 and built.max_grad_norm == plan.training.max_grad_norm
    assert built.output_dir == str(tmp_path / "checkpoints")
    assert built.include_num_input_tokens_seen == "non_padding" and not built.bf16 and not built.fp16
    assert built.use_cpu and not built.logging_nan_inf_filter


def test_without_steps_or_eval_the_run_is_the_plans_epochs_unevaluated(tmp_path: Path) -> None:
    plan = make_plan(workload={"epochs": 2})
    built = _build(plan, _args(tmp_path))
    assert (built.max_steps, built.num_train_epochs, built.eval_strategy.value) == (-1, 2, "no")


def test_the_optimizer_stepped_in_the_backward_clips_nothing(tmp_path: Path) -> None:
    plan = make_plan(method="full", grad_accum=1, optimizer_in_backward=True)
    assert _build(plan, _args(tmp_path)).max_grad_norm == 0.0


@pytest.mark.parametrize(
    ("sharding", "options"), [("fsdp", "full_shard auto_wrap"), ("fsdp-offload", "full_shard auto_wrap offload")]
)
def test_an_fsdp_plan_wraps_the_decoder_layers_and_offloads_when_planned(sharding: str, options: str) -> None:
    plan = make_plan(sharding=sharding, gpus=2, method="full", grad_ckpt=True)
    fsdp = fsdp_arguments(plan)
    assert fsdp["fsdp"] == options
    assert fsdp["fsdp_config"] == {
        "transformer_layer_cls_to_wrap": ["LlamaDecoderLayer"],
        "activation_checkpointing": True,
    }


@pytest.mark.parametrize("value", ["1", "true", "TRUE"])
def test_under_accelerate_launch_or_without_fsdp_nothing_is_added(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    assert fsdp_arguments(make_plan(sharding="ddp", gpus=2)) == {}
    monkeypatch.setenv("ACCELERATE_USE_FSDP", value)
    assert fsdp_arguments(make_plan(sharding="fsdp", gpus=2, method="full")) == {}


def test_refusals_are_one_line_before_anything_loads(tmp_path: Path) -> None:
    zero = make_plan(sharding="zero2", gpus=2, method="full")
    with pytest.raises(ConfigError, match="sharding=zero2: pass --deepspeed-config"):
        _build(zero, _args(tmp_path))
    with pytest.raises(ConfigError, match=r"DeepSpeed config .*missing\.json not found"):
        _build(zero, _args(tmp_path, deepspeed_config=tmp_path / "missing.json"))
    json_file = tmp_path / "ds.json"
    json_file.write_text("{}")
    with pytest.raises(ConfigError, match="--deepspeed-config given but the plan says sharding=none"):
        _build(make_plan(), _args(tmp_path, deepspeed_config=json_file))


@pytest.mark.parametrize("sharding", ["fsdp", "zero3"])
def test_the_chunked_loss_with_sharded_parameters_is_refused(tmp_path: Path, sharding: str) -> None:
    plan = make_plan(sharding=sharding, gpus=2, method="full", loss_impl="chunked")
    json_file = tmp_path / "ds.json"
    json_file.write_text("{}")
    deepspeed = {"deepspeed_config": json_file} if sharding == "zero3" else {}
    with pytest.raises(ConfigError, match=f"loss_impl=chunked is not supported with sharding={sharding}"):
        _build(plan, _args(tmp_path, **deepspeed))
