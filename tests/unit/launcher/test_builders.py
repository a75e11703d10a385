"""Builder behaviour beyond the golden files: values follow the plan, refusals, SLURM quoting."""

from __future__ import annotations

import shlex
import subprocess
from typing import Any

import pytest
import yaml
from plans import LLAMA_8B, make_plan

from autotune.errors import InvalidRequestError
from autotune.launcher import LaunchOptions, accelerate_config, build_launch_spec, deepspeed_config
from autotune.launcher.command import node_command
from autotune.launcher.slurm import with_interpreter
from autotune.schemas.model import ModelSpec


def options(**values: Any) -> LaunchOptions:
    return LaunchOptions(**{"dataset": "/d.jsonl", "output_dir": "/out", **values})


@pytest.mark.parametrize(("mbs", "accum", "gpus"), [(1, 1, 1), (2, 8, 4), (4, 3, 8)])
def test_deepspeed_batches_equal_the_plan(mbs: int, accum: int, gpus: int) -> None:
    plan = make_plan(sharding="zero3", gpus=gpus, micro_batch_size=mbs, grad_accum=accum)
    config = deepspeed_config(plan)
    assert config["train_micro_batch_size_per_gpu"] == mbs
    assert config["gradient_accumulation_steps"] == accum
    assert config["train_batch_size"] == plan.workload.global_batch_size == mbs * accum * gpus


@pytest.mark.parametrize(
    ("precision", "bf16", "fp16"),
    [("bf16", True, False), ("bf16-mixed", True, False), ("fp16-mixed", False, True), ("fp32", False, False)],
)
def test_deepspeed_precision(precision: str, bf16: bool, fp16: bool) -> None:
    config = deepspeed_config(make_plan(sharding="zero2", gpus=2, method="full", precision=precision))
    assert (config["bf16"]["enabled"], config["fp16"]["enabled"]) == (bf16, fp16)
    on_cpu = deepspeed_config(make_plan(sharding="zero2", gpus=2, method="full", precision=precision), cpu=True)
    # the CPU trainer runs fp16-mixed as bf16 (no fp16 autocast on the CPU), and the JSON must say the same
    assert (on_cpu["bf16"]["enabled"], on_cpu["fp16"]["enabled"]) == (bf16 or fp16, False)


@pytest.mark.parametrize(
    ("sharding", "stage", "offload"), [("zero2", 2, False), ("zero3", 3, False), ("zero3-offload", 3, True)]
)
def test_deepspeed_stage_and_offload(sharding: str, stage: int, offload: bool) -> None:
    zero = deepspeed_config(make_plan(sharding=sharding, gpus=2))["zero_optimization"]
    assert zero["stage"] == stage
    assert ("offload_optimizer" in zero) == offload == ("offload_param" in zero)
    assert zero.get("stage3_gather_16bit_weights_on_model_save", False) == (stage == 3)


def test_zero_offload_refuses_8bit_optimizer() -> None:
    plan = make_plan(sharding="zero3-offload", gpus=2, optimizer="adamw-8bit")
    with pytest.raises(InvalidRequestError, match="optimizer=adamw"):
        build_launch_spec(plan, options())


def test_accelerate_config_follows_the_plan() -> None:
    qwen = ModelSpec(**{**LLAMA_8B.model_dump(), "key": "qwen", "decoder_layer_class": "Qwen2DecoderLayer"})
    plan = make_plan(sharding="fsdp", gpus=4, model=qwen, grad_ckpt=False, precision="fp16-mixed")
    config = accelerate_config(plan)
    fsdp = config["fsdp_config"]
    assert fsdp["fsdp_transformer_layer_cls_to_wrap"] == "Qwen2DecoderLayer"
    assert fsdp["fsdp_activation_checkpointing"] is False
    assert fsdp["fsdp_offload_params"] is False
    assert config["mixed_precision"] == "fp16"
    assert config["num_processes"] == 4 and config["num_machines"] == 1
    assert "main_process_ip" not in config
    offload = accelerate_config(make_plan(sharding="fsdp-offload", gpus=2, precision="fp32"))
    assert offload["fsdp_config"]["fsdp_offload_params"] is True and offload["mixed_precision"] == "no"


def test_accelerate_config_is_written_as_yaml() -> None:
    plan = make_plan(sharding="fsdp", gpus=2, nodes=3)
    spec = build_launch_spec(plan, options(node_rank=2, main_process_ip="node0", main_process_port=7000))
    config = yaml.safe_load(spec.files["accelerate_config.yaml"])
    assert config == accelerate_config(plan, node_rank=2, main_process_ip="node0", main_process_port=7000)
    assert (config["num_processes"], config["machine_rank"], config["main_process_port"]) == (6, 2, 7000)


def test_configs_refuse_other_shardings() -> None:
    with pytest.raises(InvalidRequestError):
        accelerate_config(make_plan(sharding="ddp", gpus=2))
    with pytest.raises(InvalidRequestError):
        deepspeed_config(make_plan(sharding="fsdp", gpus=2))


def test_sharding_none_on_several_gpus_is_refused() -> None:
    with pytest.raises(InvalidRequestError, match="sharding=none"):
        build_launch_spec(make_plan(sharding="none", gpus=4), options())


def test_multi_node_needs_the_main_address_unless_slurm() -> None:
    plan = make_plan(sharding="ddp", gpus=8, nodes=2)
    with pytest.raises(InvalidRequestError, match="--main-process-ip"):
        build_launch_spec(plan, options())
    assert build_launch_spec(plan, options(slurm=True)).argv[0] == "sbatch"


def test_node_rank_out_of_range() -> None:
    with pytest.raises(InvalidRequestError, match="--node-rank 2"):
        build_launch_spec(make_plan(sharding="ddp", gpus=8, nodes=2), options(node_rank=2, main_process_ip="h"))


def test_cpu_runs_multi_process_with_torchrun_and_only_the_files_used() -> None:
    for sharding in ("ddp", "zero2", "zero3-offload"):  # FSDP is refused with --cpu (test_launch_refusals)
        spec = build_launch_spec(make_plan(sharding=sharding, gpus=2), options(cpu=True))
        assert spec.argv[:3] == ["torchrun", "--nproc_per_node", "2"]
        assert "--cpu" in spec.argv
        assert ("deepspeed_config.json" in spec.files) == sharding.startswith("zero")
        assert "accelerate_config.yaml" not in spec.files


def test_single_node_port_given_replaces_standalone() -> None:
    spec = build_launch_spec(make_plan(sharding="ddp", gpus=2), options(main_process_port=29600))
    assert "--standalone" not in spec.argv
    assert spec.argv[spec.argv.index("--master_port") + 1] == "29600"


@pytest.mark.parametrize("sharding", ["ddp", "fsdp-offload", "zero3"])
def test_slurm_command_expands_on_each_node(sharding: str) -> None:
    """Run the script's ``bash -c`` payload with printf in place of the launcher: the node sees the
    same arguments as a manual launch with its rank, even with a space in the output directory."""
    plan = make_plan(sharding=sharding, gpus=4, nodes=3)
    opts = options(output_dir="/shared/my runs/x", slurm=True, main_process_port=6000)
    script = build_launch_spec(plan, opts).files["launch.sbatch"]
    srun_line = next(line for line in script.splitlines() if line.startswith("srun "))
    srun_argv = shlex.split(srun_line)
    assert srun_argv[:5] == ["srun", "--nodes=3", "--ntasks-per-node=1", "bash", "-c"]
    payload = srun_argv[5]
    printed = subprocess.run(
        ["bash", "-c", "printf '%s\\n' " + payload],
        env={"SLURM_NODEID": "2", "MASTER_ADDR": "node-a", "MASTER_PORT": "6000", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    expected = with_interpreter(
        node_command(plan, opts, node_rank="2", master_addr="node-a", master_port="6000"), opts.python
    )
    assert printed == expected and printed[:2] == ["python", "-m"]  # launchers run by the planning interpreter
    assert "MASTER_PORT=6000" in script.splitlines()
    assert '#SBATCH --output="/shared/my runs/x/slurm-%j.out"' in script.splitlines()


def test_slurm_script_on_cpu_requests_no_gpus() -> None:
    script = build_launch_spec(make_plan(sharding="ddp", gpus=2), options(slurm=True, cpu=True)).files["launch.sbatch"]
    assert "--gpus-per-node" not in script and "#SBATCH --nodes=1" in script


def test_trainer_passthrough_options() -> None:
    opts = options(max_steps=3, save_steps=2, logging_steps=1, learning_rate=3e-4, warmup_ratio=0.05, seed=1)
    argv = build_launch_spec(make_plan(), opts).argv
    trainer = argv[argv.index("autotune.trainer") + 1 :]
    pairs = dict(zip(trainer[::2], trainer[1::2], strict=True))
    assert pairs["--max-steps"] == "3" and pairs["--save-steps"] == "2" and pairs["--logging-steps"] == "1"
    assert float(pairs["--learning-rate"]) == 3e-4 and float(pairs["--warmup-ratio"]) == 0.05
    assert pairs["--seed"] == "1" and pairs["--plan"] == "/out/plan.yaml"


@pytest.mark.parametrize(("sharding", "stage"), [("zero2", 2), ("zero3", 3)])
def test_zero_without_offload_on_one_gpu_is_one_deepspeed_process(sharding: str, stage: int) -> None:
    """Issue 28: ``--sharding zero3`` on one GPU runs DeepSpeed in one process (torchrun sets its rank and world)."""
    plan = make_plan(sharding=sharding, gpus=1, micro_batch_size=2, grad_accum=4)
    spec = build_launch_spec(plan, options())
    assert spec.argv[:4] == ["torchrun", "--nproc_per_node", "1", "--standalone"]
    assert spec.argv[spec.argv.index("--deepspeed-config") + 1] == "/out/deepspeed_config.json"
    config = deepspeed_config(plan)
    assert config["zero_optimization"]["stage"] == stage and "offload_param" not in config["zero_optimization"]
    assert config["train_batch_size"] == 2 * 4 * 1
