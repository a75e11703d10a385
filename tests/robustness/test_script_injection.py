"""Nothing a plan or a path contains runs as a command: hostile values in every field that reaches a script.

Each hostile value goes into one field; the launch is either refused with one line, or the written
``launch.sbatch`` is executed by bash (``srun`` / ``scontrol`` / the launchers replaced by stubs that
record their argv) and must run exactly the planned command with the value as one literal argument,
creating no file. The accelerate and DeepSpeed configs must read back the value unchanged.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from plans import LLAMA_8B, make_plan

from autotune.errors import InvalidRequestError
from autotune.launcher import LaunchOptions, build_launch_spec
from autotune.launcher.command import node_command
from autotune.launcher.options import ACCELERATE_CONFIG_FILE, SLURM_SCRIPT_FILE
from autotune.launcher.slurm import with_interpreter
from autotune.profiles.catalog import resolve_gpu

HOSTILE = [
    "$(touch PWNED)",
    "`touch PWNED`",
    "x; touch PWNED",
    "x\ntouch PWNED",
    "x' ; touch PWNED; '",
    'x" ; touch PWNED; "',
    "x && touch PWNED",
    "x | touch PWNED",
    "${IFS}touch${IFS}PWNED",
    "x\r\ntouch PWNED",
    "-x",
    "x #y",
    "x\ttouch PWNED",
]
IDS = [f"payload{index}" for index in range(len(HOSTILE))]

STUB_RECORD = '#!/bin/sh\nfor a in "$@"; do printf "%s\\0" "$a"; done > "$RECORD"\n'
STUBS = {
    "scontrol": "#!/bin/sh\necho node0\n",
    "srun": '#!/bin/sh\nwhile [ "$1" != bash ]; do shift; done\nexec "$@"\n',
    "torchrun": STUB_RECORD,
    "accelerate": STUB_RECORD,
    "python": STUB_RECORD,
}


def _stub_path(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, text in STUBS.items():
        stub = bin_dir / name
        stub.write_text(text)
        stub.chmod(stub.stat().st_mode | stat.S_IEXEC)
    return bin_dir


def _run_script(tmp_path: Path, script: str) -> list[str]:
    """Execute the sbatch script with stubs; return the argv the node's launcher received."""
    work = tmp_path / "cwd"
    work.mkdir(exist_ok=True)
    (work / "launch.sbatch").write_text(script)
    record = tmp_path / "argv.bin"
    env = {
        "PATH": f"{_stub_path(tmp_path)}:/usr/bin:/bin",
        "RECORD": str(record),
        "SLURM_NODEID": "0",
        "SLURM_JOB_NODELIST": "node[0-1]",
        "HOME": str(tmp_path),
    }
    proc = subprocess.run(["bash", "launch.sbatch"], cwd=work, env=env, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert not list(work.glob("PWNED*")) and not list(tmp_path.glob("PWNED*")), "a hostile value ran as a command"
    return record.read_bytes().decode().split("\0")[:-1]


def _expected(plan: Any, options: LaunchOptions) -> list[str]:
    argv = node_command(plan, options, node_rank="0", master_addr="node0", master_port="29500")
    return with_interpreter(argv, options.python)[1:]  # the script runs the launchers with options.python


def _launch(plan: Any, options: LaunchOptions, tmp_path: Path) -> None:
    try:
        spec = build_launch_spec(plan, options)
    except InvalidRequestError as error:
        assert "\n" not in str(error)
        return
    recorded = _run_script(tmp_path, spec.files[SLURM_SCRIPT_FILE])
    assert recorded == _expected(plan, options)


def _options(tmp_path: Path, **values: Any) -> LaunchOptions:
    defaults: dict[str, Any] = {"dataset": "org/data", "output_dir": str(tmp_path / "run"), "slurm": True}
    return LaunchOptions(**{**defaults, **values})


SHARDINGS = [("none", 1, 1), ("ddp", 2, 2), ("fsdp", 2, 2)]


@pytest.mark.parametrize("value", HOSTILE, ids=IDS)
@pytest.mark.parametrize("sharding,gpus,nodes", SHARDINGS[1:], ids=["ddp", "fsdp"])
def test_hostile_output_dir(tmp_path: Path, value: str, sharding: str, gpus: int, nodes: int) -> None:
    plan = make_plan(sharding=sharding, gpus=gpus, nodes=nodes)
    _launch(plan, _options(tmp_path, output_dir=str(tmp_path / value)), tmp_path)


@pytest.mark.parametrize("value", HOSTILE, ids=IDS)
def test_hostile_dataset(tmp_path: Path, value: str) -> None:
    _launch(make_plan(sharding="ddp", gpus=2, nodes=2), _options(tmp_path, dataset=value), tmp_path)


@pytest.mark.parametrize("value", HOSTILE, ids=IDS)
@pytest.mark.parametrize("field", ["model_key", "gpu", "model_source"])
def test_hostile_plan_field(tmp_path: Path, value: str, field: str) -> None:
    plan = make_plan()  # one GPU: python -m autotune.trainer
    if field == "model_key":
        plan = plan.model_copy(update={"model": LLAMA_8B.model_copy(update={"key": value})})
    elif field == "gpu":
        plan = plan.model_copy(update={"cluster": plan.cluster.model_copy(update={"gpu": value})})
    else:
        plan = plan.model_copy(update={"model_source": value})
    _launch(plan, _options(tmp_path), tmp_path)


@pytest.mark.parametrize("value", [*HOSTILE, "LlamaDecoderLayer"], ids=[*IDS, "valid"])
def test_hostile_decoder_layer_class_in_accelerate_config(tmp_path: Path, value: str) -> None:
    model = LLAMA_8B.model_copy(update={"decoder_layer_class": value})
    plan = make_plan(sharding="fsdp", gpus=2).model_copy(update={"model": model})
    try:
        spec = build_launch_spec(plan, _options(tmp_path, slurm=False))
    except InvalidRequestError:
        assert value != "LlamaDecoderLayer"
        return
    config = yaml.safe_load(spec.files[ACCELERATE_CONFIG_FILE])
    assert config["fsdp_config"]["fsdp_transformer_layer_cls_to_wrap"] == value


@pytest.mark.parametrize("value", [*HOSTILE, "10.0.0.1", "node-0.cluster", "[fe80::1]"], ids=[*IDS, "ip", "host", "v6"])
def test_hostile_main_process_ip(tmp_path: Path, value: str) -> None:
    plan = make_plan(sharding="ddp", gpus=2, nodes=2)
    try:
        spec = build_launch_spec(plan, _options(tmp_path, slurm=False, main_process_ip=value))
    except InvalidRequestError:
        assert not value[0].isalnum() or any(c in value for c in " ;|&$`'\"\n\t")
        return
    assert spec.argv[spec.argv.index("--master_addr") + 1] == value


def test_deepspeed_config_is_json_of_plain_numbers(tmp_path: Path) -> None:
    spec = build_launch_spec(make_plan(sharding="zero3", gpus=2), _options(tmp_path, slurm=False))
    config = json.loads(spec.files["deepspeed_config.json"])
    assert config["train_micro_batch_size_per_gpu"] == 2 and config["zero_optimization"]["stage"] == 3


def test_environment_holds_only_fixed_values(tmp_path: Path) -> None:
    spec = build_launch_spec(make_plan(), _options(tmp_path, dataset="$(touch PWNED)", slurm=False))
    assert all(not any(c in v for c in "$`;\n") for v in spec.env.values())
    assert "$(touch PWNED)" in spec.argv  # one literal argument of an argv list: no shell involved
    assert not os.path.exists("PWNED")


def _run_skypilot_node(tmp_path: Path, run_script: str) -> list[str]:
    """Execute a SkyPilot task's ``run`` script on node 1 (its venv's python a stub); return the argv it received."""
    home = tmp_path / "home"
    (home / "autotune-venv" / "bin").mkdir(parents=True, exist_ok=True)
    python = home / "autotune-venv" / "bin" / "python"
    python.write_text(STUB_RECORD)
    python.chmod(python.stat().st_mode | stat.S_IEXEC)
    work = tmp_path / "cwd"
    work.mkdir(exist_ok=True)
    record = tmp_path / "argv.bin"
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(home),
        "RECORD": str(record),
        "SKYPILOT_NODE_RANK": "1",
        "SKYPILOT_NODE_IPS": "node0\nnode1",
    }
    proc = subprocess.run(["bash", "-c", run_script], cwd=work, env=env, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert not list(work.glob("PWNED*")) and not list(tmp_path.glob("PWNED*")), "a hostile value ran as a command"
    return record.read_bytes().decode().split("\0")[:-1]


@pytest.mark.parametrize("value", HOSTILE, ids=IDS)
@pytest.mark.parametrize("field", ["output_dir", "dataset"])
def test_hostile_path_in_skypilot_task(tmp_path: Path, value: str, field: str) -> None:
    """The task's YAML reads back each path unchanged, and its run script passes it as one literal argument."""
    plan = make_plan(sharding="ddp", gpus=2, nodes=2, gpu="h100-80gb")
    path = str(tmp_path / value)
    options = _options(tmp_path, slurm=False, skypilot=True, project_dir=str(tmp_path), **{field: path})
    try:
        spec = build_launch_spec(plan, options, resolve_gpu("h100-80gb")[0])
    except InvalidRequestError as error:
        assert "\n" not in str(error)
        return
    task = yaml.safe_load(spec.files["sky.yaml"])
    mounted = task["file_mounts"][path]
    assert (mounted["source"] if field == "output_dir" else mounted) == path  # the output directory is a bucket's
    assert all(re.fullmatch(r"/[A-Za-z0-9._/@+=,:-]*", destination) for destination in task["file_mounts"])
    argv = node_command(plan, options, node_rank="1", master_addr="node0", master_port="29500")
    assert _run_skypilot_node(tmp_path, task["run"]) == with_interpreter(argv, "python")[1:]
