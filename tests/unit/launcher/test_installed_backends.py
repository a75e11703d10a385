"""The generated configs read by the installed accelerate and DeepSpeed (imported inside the tests).

accelerate: ``accelerate launch``'s own argument handling turns our YAML into the ``FSDP_*``
environment of the training processes (``prepare_multi_gpu_env``); we check what arrives there.
DeepSpeed: its config classes parse our JSON once ``"auto"`` is filled as transformers fills it.
Each test imports torch (a few seconds).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from plans import make_plan

from autotune.launcher import LaunchOptions, build_launch_spec, deepspeed_config


def accelerate_env(tmp_path: Path, yaml_text: str) -> tuple[Any, dict[str, str]]:
    launch = pytest.importorskip("accelerate.commands.launch")
    from accelerate.utils.launch import prepare_multi_gpu_env

    path = tmp_path / "accelerate_config.yaml"
    path.write_text(yaml_text, encoding="utf-8")
    args = launch.launch_command_parser().parse_args(["--config_file", str(path), "-m", "autotune.trainer"])
    args, _, _ = launch._validate_launch_command(args)
    return args, prepare_multi_gpu_env(args)


def test_accelerate_reads_the_fsdp_yaml(tmp_path: Path) -> None:
    plan = make_plan(sharding="fsdp-offload", gpus=8, nodes=2, method="full", grad_ckpt=True)
    options = LaunchOptions(dataset="d", output_dir=str(tmp_path), node_rank=1, main_process_ip="10.1.2.3")
    args, env = accelerate_env(tmp_path, build_launch_spec(plan, options).files["accelerate_config.yaml"])
    assert args.use_fsdp and not args.cpu
    assert (args.num_processes, args.num_machines, args.machine_rank) == (16, 2, 1)
    assert (args.main_process_ip, args.main_process_port) == ("10.1.2.3", 29500)
    assert env["ACCELERATE_USE_FSDP"] == "true"
    assert env["ACCELERATE_MIXED_PRECISION"] == "bf16"
    expected = {
        "FSDP_VERSION": "1",
        "FSDP_SHARDING_STRATEGY": "FULL_SHARD",
        "FSDP_AUTO_WRAP_POLICY": "TRANSFORMER_BASED_WRAP",
        "FSDP_TRANSFORMER_CLS_TO_WRAP": "LlamaDecoderLayer",
        "FSDP_OFFLOAD_PARAMS": "true",
        "FSDP_ACTIVATION_CHECKPOINTING": "true",
        "FSDP_STATE_DICT_TYPE": "SHARDED_STATE_DICT",
        "FSDP_USE_ORIG_PARAMS": "true",
        "FSDP_CPU_RAM_EFFICIENT_LOADING": "true",
        "FSDP_SYNC_MODULE_STATES": "true",
    }
    assert {key: env[key] for key in expected} == expected


def test_accelerate_single_node_without_offload(tmp_path: Path) -> None:
    plan = make_plan(sharding="fsdp", gpus=4, grad_ckpt=False, precision="fp32")
    yaml_text = build_launch_spec(plan, LaunchOptions(dataset="d", output_dir=str(tmp_path))).files[
        "accelerate_config.yaml"
    ]
    args, env = accelerate_env(tmp_path, yaml_text)
    assert (args.num_processes, args.num_machines) == (4, 1)
    assert env["FSDP_OFFLOAD_PARAMS"] == "false" and env["FSDP_ACTIVATION_CHECKPOINTING"] == "false"
    assert env["ACCELERATE_MIXED_PRECISION"] == "no"


def _fill_auto(config: dict[str, Any], hidden_size: int) -> dict[str, Any]:
    """Replace "auto" the way transformers' HfTrainerDeepSpeedConfig does for these keys."""
    filled = json.loads(json.dumps(config))
    zero = filled["zero_optimization"]
    for key, value in {
        "reduce_bucket_size": hidden_size * hidden_size,
        "stage3_prefetch_bucket_size": int(0.9 * hidden_size * hidden_size),
        "stage3_param_persistence_threshold": 10 * hidden_size,
    }.items():
        if zero.get(key) == "auto":
            zero[key] = value
    filled["gradient_clipping"] = 1.0
    if "optimizer" in filled:
        filled["optimizer"]["params"] = {"lr": 2e-4, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.0}
    return filled


@pytest.mark.parametrize(
    ("sharding", "precision"), [("zero2", "fp16-mixed"), ("zero3", "bf16"), ("zero3-offload", "bf16-mixed")]
)
def test_deepspeed_parses_the_json(sharding: str, precision: str) -> None:
    ds_config = pytest.importorskip("deepspeed.runtime.config")
    plan = make_plan(sharding=sharding, gpus=1, micro_batch_size=2, grad_accum=4, precision=precision)
    config = ds_config.DeepSpeedConfig(_fill_auto(deepspeed_config(plan), plan.model.hidden_size))
    assert config.zero_optimization_stage == (2 if sharding == "zero2" else 3)
    assert (config.train_micro_batch_size_per_gpu, config.gradient_accumulation_steps) == (2, 4)
    assert config.train_batch_size == 8
    assert config.bfloat16_config.enabled == precision.startswith("bf16")
    assert config.float16_config.enabled == (precision == "fp16-mixed")
    offload = sharding == "zero3-offload"
    assert (config.zero_config.offload_optimizer is not None) == offload
    assert (config.zero_config.offload_param is not None) == offload
    if offload:
        assert config.optimizer_name == "adamw"


@pytest.mark.parametrize("precision", ["bf16", "bf16-mixed", "fp16-mixed", "fp32"])
def test_deepspeed_precision_agrees_with_the_trainer_on_the_cpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, precision: str
) -> None:
    """The training core's TrainingArguments accept the launcher's ``--cpu`` JSON for every precision:
    transformers checks ``bf16.enabled`` / ``fp16.enabled`` against its switches while building them (a
    zero3-offload plan in pure bf16 once stopped there: ``ds bf16.enabled=True vs hf bf16=False``). GPU
    TrainingArguments cannot be built without a GPU; the same rule serves both (``trainer_precision_switches``)."""
    cpu = True
    pytest.importorskip("deepspeed")
    from autotune.trainer.args import TrainerArgs
    from autotune.trainer.hf_args import build_training_arguments
    from autotune.trainer.model import choose_precision

    for name in ("ACCELERATE_USE_DEEPSPEED", "ACCELERATE_DEEPSPEED_ZERO_STAGE"):
        monkeypatch.delenv(name, raising=False)  # TrainingArguments sets them; restored after the test
    plan = make_plan(sharding="zero3-offload", gpus=1, method="full", precision=precision, grad_accum=4)
    spec = build_launch_spec(plan, LaunchOptions(dataset="d", output_dir=str(tmp_path), cpu=cpu))
    ds_path = tmp_path / "deepspeed_config.json"
    ds_path.write_text(spec.files["deepspeed_config.json"], encoding="utf-8")
    args = TrainerArgs(
        plan_path=tmp_path / "plan.yaml", dataset="d", output_dir=str(tmp_path), cpu=cpu, deepspeed_config=ds_path
    )
    training_args = build_training_arguments(plan, args, choose_precision(plan.setting, cpu))
    engine_16bit = precision in ("bf16", "bf16-mixed") or (cpu and precision == "fp16-mixed")
    assert training_args.hf_deepspeed_config.config["bf16"]["enabled"] == training_args.bf16 == engine_16bit
    assert training_args.hf_deepspeed_config.config["fp16"]["enabled"] == training_args.fp16


@pytest.mark.parametrize("grad_sync", ["last-micro-step", "every-micro-step"])
def test_fsdp_grad_sync_reaches_the_trainer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, grad_sync: str) -> None:
    """``grad_sync`` every-micro-step asks accelerate for ``sync_each_batch`` (the Trainer then skips FSDP's
    ``no_sync``, so no unsharded gradients accumulate); the default leaves the Trainer's no_sync accumulation."""
    pytest.importorskip("accelerate")
    from autotune.trainer.args import TrainerArgs
    from autotune.trainer.hf_args import build_training_arguments
    from autotune.trainer.model import choose_precision

    monkeypatch.delenv("ACCELERATE_USE_FSDP", raising=False)
    plan = make_plan(sharding="fsdp", gpus=2, method="full", precision="bf16-mixed", grad_sync=grad_sync)
    args = TrainerArgs(plan_path=tmp_path / "plan.yaml", dataset="d", output_dir=str(tmp_path), cpu=True)
    training_args = build_training_arguments(plan, args, choose_precision(plan.setting, True))
    kwargs = training_args.accelerator_config.gradient_accumulation_kwargs or {}
    assert kwargs.get("sync_each_batch", False) == (grad_sync == "every-micro-step")


@pytest.mark.parametrize("sharding", ["fsdp", "fsdp-offload"])
def test_fsdp_checkpointing_is_fsdps_own_under_accelerate_launch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sharding: str
) -> None:
    """Under ``accelerate launch`` (ACCELERATE_USE_FSDP set) the checkpointing is FSDP's own, from the launcher's
    accelerate config, and the Trainer's switch stays off: transformers 5.23 refuses both at once
    (``Trainer.create_accelerator_and_postprocess``), which stopped every FSDP plan with checkpointing on an H200
    (benchmarks/gpu_sweep.py, full-1b-fsdp-offload) while the CPU tests, built without accelerate launch, passed."""
    pytest.importorskip("accelerate")
    import yaml

    from autotune.trainer.args import TrainerArgs
    from autotune.trainer.hf_args import build_training_arguments
    from autotune.trainer.model import choose_precision

    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")
    plan = make_plan(sharding=sharding, gpus=1 if sharding == "fsdp-offload" else 2, method="full", grad_ckpt=True)
    spec = build_launch_spec(plan, LaunchOptions(dataset="d", output_dir=str(tmp_path)))
    assert yaml.safe_load(spec.files["accelerate_config.yaml"])["fsdp_config"]["fsdp_activation_checkpointing"]
    args = TrainerArgs(plan_path=tmp_path / "plan.yaml", dataset="d", output_dir=str(tmp_path), cpu=True)
    assert not build_training_arguments(plan, args, choose_precision(plan.setting, True)).activation_checkpointing
