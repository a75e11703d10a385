"""`launch --skypilot`: the task's fields follow the plan, its run script runs the planned command on each node."""

from __future__ import annotations

import copy
import json
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_runner import run
from fake_sky import install_fake_sky
from plans import make_plan

from autotune.cli import launch_cmd
from autotune.errors import InvalidRequestError
from autotune.launcher import LaunchOptions, LaunchSpec, build_launch_spec, skypilot
from autotune.launcher.command import node_command
from autotune.launcher.options import SKYPILOT_TASK_FILE
from autotune.launcher.slurm import with_interpreter
from autotune.schemas.plan import PlanFile
from autotune.session.resolve import catalog_gpu

STUB_RECORD = '#!/bin/sh\nfor a in "$@"; do printf "%s\\0" "$a"; done > "$RECORD"\n'
STUB_PYTHON = (
    "#!/bin/sh\n"  # the node's venv python: the relaunch question goes to the real interpreter, the run is recorded
    f'if [ "$2" = autotune.launcher.relaunch ]; then exec {sys.executable} "$@"; fi\n'
    'for a in "$@"; do printf "%s\\0" "$a"; done > "$RECORD"\n'
)


def _options(tmp_path: Path, **values: Any) -> LaunchOptions:
    defaults: dict[str, Any] = {
        "dataset": str(tmp_path / "data.jsonl"),
        "output_dir": str(tmp_path / "run"),
        "skypilot": True,
        "project_dir": str(tmp_path / "checkout"),
    }
    return LaunchOptions(**{**defaults, **values})


def _spec(plan: PlanFile, options: LaunchOptions) -> LaunchSpec:
    """The launch spec with the plan GPU's catalog entry, as the launch checks build it."""
    return build_launch_spec(plan, options, catalog_gpu(plan.cluster.gpu))


def _task(plan: Any, options: LaunchOptions) -> dict[str, Any]:
    """The task as written to OUT/sky.yaml and read back."""
    spec = _spec(plan, options)
    return yaml.safe_load(spec.files[SKYPILOT_TASK_FILE])


def _run_node(tmp_path: Path, run: str, *, rank: int, ips: str = "10.0.0.7\n10.0.0.8") -> list[str]:
    """Execute the task's ``run`` script as SkyPilot does on node ``rank``; return the argv its Python received."""
    home = tmp_path / "home"
    venv_bin = home / "autotune-venv" / "bin"
    venv_bin.mkdir(parents=True, exist_ok=True)
    python = venv_bin / "python"
    python.write_text(STUB_PYTHON)
    python.chmod(python.stat().st_mode | stat.S_IEXEC)
    record = tmp_path / "argv.bin"
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(home),
        "RECORD": str(record),
        "SKYPILOT_NODE_RANK": str(rank),
        "SKYPILOT_NODE_IPS": ips,
        "SKYPILOT_NUM_NODES": "2",
    }
    work = tmp_path / "sky_workdir"
    work.mkdir(exist_ok=True)
    proc = subprocess.run(["bash", "-c", run], cwd=work, env=env, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    return record.read_bytes().decode().split("\0")[:-1]


def test_task_follows_the_plan(tmp_path: Path) -> None:
    plan = make_plan(sharding="zero3", gpus=8, nodes=2, gpu="h100-80gb")
    options = _options(tmp_path)
    task = _task(plan, options)
    assert task["num_nodes"] == 2
    assert task["resources"] == {
        "any_of": [
            {"cloud": "runpod", "accelerators": "H100-SXM:8"},
            {"cloud": "lambda", "accelerators": "H100:8", "instance_type": "gpu_8x_h100_sxm5"},
        ]
    }
    assert task["workdir"] == options.project_dir
    bucket = {"name": skypilot.bucket_name(options), "source": options.output_dir, "mode": "MOUNT_CACHED"}
    assert task["file_mounts"] == {options.output_dir: bucket, options.dataset: options.dataset}
    assert task["envs"] == {"PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false"}
    assert "-c constraints.txt torch" in task["setup"] and "-e '.[train]'" in task["setup"]


def test_spec_prints_sky_launch_and_writes_the_task(tmp_path: Path) -> None:
    options = _options(tmp_path, output_dir=str(tmp_path / "My.Run_2"))
    spec = _spec(make_plan(sharding="ddp", gpus=2, gpu="a100-80gb"), options)
    task_file = str(Path(options.output_dir) / SKYPILOT_TASK_FILE)
    assert spec.argv == ["sky", "launch", "-c", "autotune-my-run-2", task_file]
    assert spec.files[SKYPILOT_TASK_FILE].startswith("# Written by `autotune launch --skypilot`. Start it with: sky ")
    resources = yaml.safe_load(spec.files[SKYPILOT_TASK_FILE])["resources"]
    assert resources == {"cloud": "runpod", "accelerators": "A100-80GB-SXM:2"}  # Lambda's SXM A100s come 8 a node


def test_one_card_under_two_names_lists_both(tmp_path: Path) -> None:
    task = _task(make_plan(sharding="ddp", gpus=4, gpu="rtx-a6000"), _options(tmp_path))
    assert task["resources"] == {
        "any_of": [{"cloud": "lambda", "accelerators": "A6000:4"}, {"cloud": "runpod", "accelerators": "RTXA6000:4"}]
    }


@pytest.mark.parametrize(
    ("sharding", "gpus", "nodes"), [("none", 1, 1), ("ddp", 4, 2), ("fsdp", 8, 2), ("zero3-offload", 2, 2)]
)
def test_run_script_runs_the_planned_command_on_each_node(tmp_path: Path, sharding: str, gpus: int, nodes: int) -> None:
    plan = make_plan(sharding=sharding, gpus=gpus, nodes=nodes, gpu="h100-80gb")
    options = _options(tmp_path)
    run = _task(plan, options)["run"]
    for rank in range(nodes):
        recorded = _run_node(tmp_path, run, rank=rank)
        expected = node_command(plan, options, node_rank=str(rank), master_addr="10.0.0.7", master_port="29500")
        assert recorded == with_interpreter(expected, "python")[1:]


def test_a_relaunch_resumes_a_run_that_trained_and_restarts_one_that_did_not(tmp_path: Path) -> None:
    plan = make_plan(sharding="ddp", gpus=2, nodes=1, gpu="l4")
    options = _options(tmp_path)
    run = _task(plan, options)["run"]
    out = Path(options.output_dir)
    assert "--resume" not in _run_node(tmp_path, run, rank=0)  # first launch: no directory yet
    out.mkdir()
    (out / "plan.yaml").write_text("mounted copy\n")
    (out / "run_report.json").write_text('{"status": "failed"}')  # stopped before its first checkpoint
    assert "--resume" not in _run_node(tmp_path, run, rank=0)
    assert (out / "run_report.1.json").is_file() and not (out / "run_report.json").exists()  # kept, not deleted
    (out / "checkpoints" / "checkpoint-10").mkdir(parents=True)
    assert _run_node(tmp_path, run, rank=0)[-1] == "--resume"


def test_several_nodes_never_resume_on_their_own(tmp_path: Path) -> None:
    plan = make_plan(sharding="ddp", gpus=2, nodes=2, gpu="l4")
    options = _options(tmp_path)
    (Path(options.output_dir) / "checkpoints" / "checkpoint-10").mkdir(parents=True)  # node 0's copy
    run = _task(plan, options)["run"]
    assert "autotune.launcher.relaunch" not in run
    assert "--resume" not in _run_node(tmp_path, run, rank=0)


def test_local_weights_and_eval_data_are_mounted_at_their_paths(tmp_path: Path) -> None:
    plan = make_plan(sharding="none", gpu="l40s").model_copy(update={"model_source": str(tmp_path / "weights")})
    options = _options(tmp_path, eval_dataset=str(tmp_path / "eval.jsonl"))
    mounts = _task(plan, options)["file_mounts"]
    assert set(mounts) == {options.output_dir, options.dataset, str(tmp_path / "eval.jsonl"), str(tmp_path / "weights")}
    assert all(source == destination for destination, source in mounts.items() if destination != options.output_dir)
    hub = _task(make_plan(sharding="none", gpu="l40s"), _options(tmp_path, dataset="tatsu-lab/alpaca"))
    assert set(hub["file_mounts"]) == {options.output_dir}  # hub names are downloaded by the nodes


def test_setup_installs_the_extras_the_run_needs(tmp_path: Path) -> None:
    plan = make_plan(sharding="none", gpu="h100-80gb", kernels="liger")  # liger is not installed here: the nodes get it
    setup = _task(plan, _options(tmp_path, report_to="tensorboard"))["setup"]
    assert "-e '.[train,liger,tensorboard]'" in setup


@pytest.mark.parametrize(
    ("values", "words"),
    [
        ({"slurm": True}, "--skypilot and --slurm"),
        ({"cpu": True}, "--cpu"),
        ({"resume": True}, "drop --resume"),
        ({"node_rank": 1}, "drop --node-rank"),
        ({"main_process_ip": "10.0.0.1"}, "drop --main-process-ip"),
        ({"project_dir": None}, "source checkout"),
    ],
)
def test_options_skypilot_cannot_go_with_are_refused(tmp_path: Path, values: dict[str, Any], words: str) -> None:
    with pytest.raises(InvalidRequestError, match=words) as error:
        _spec(make_plan(sharding="fsdp", gpus=2, gpu="h100-80gb"), _options(tmp_path, **values))
    assert "\n" not in str(error.value)


def test_a_card_skypilot_cannot_name_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidRequestError, match="no accelerator name for rx-7900-xtx"):
        _spec(make_plan(sharding="none", gpu="rx-7900-xtx"), _options(tmp_path))


class _Distribution:
    def __init__(self, text: str | None) -> None:
        self.text = text

    def read_text(self, _name: str) -> str | None:
        return self.text


def _checkout(tmp_path: Path, *, lock: bool) -> Path:
    root = tmp_path / "src"
    root.mkdir()
    (root / "pyproject.toml").write_text("[project]\nname='autotune'\n")
    if lock:
        (root / "constraints.txt").write_text("torch==2.13.0\n")
    return root


@pytest.mark.parametrize(
    ("record", "lock", "found"),
    [
        ({"url": "file://{root}", "dir_info": {"editable": True}}, True, True),
        ({"url": "file://{root}", "dir_info": {}}, True, True),
        ({"url": "file://{root}", "dir_info": {"editable": True}}, False, False),  # no lock to install with
        ({"url": "https://example.org/autotune.whl", "archive_info": {}}, True, False),
        (None, True, False),  # installed from an index: no direct_url.json
    ],
)
def test_installed_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, record: dict[str, Any] | None, lock: bool, found: bool
) -> None:
    root = _checkout(tmp_path, lock=lock)
    text = None if record is None else json.dumps(record).replace("{root}", str(root))
    monkeypatch.setattr(skypilot.metadata, "distribution", lambda _name: _Distribution(text))
    assert skypilot.installed_checkout() == (str(root) if found else None)


def test_schema_error_is_skypilots_first_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    task = skypilot.skypilot_task(make_plan(sharding="none", gpu="l4"), _options(tmp_path), catalog_gpu("l4"))
    seen = install_fake_sky(monkeypatch, ValueError("Found unsupported field 'x'.\nsee the docs"))
    assert skypilot.skypilot_installed()
    assert skypilot.skypilot_schema_error(task) == "Found unsupported field 'x'."
    assert seen == [task]
    install_fake_sky(monkeypatch, None)
    assert skypilot.skypilot_schema_error(task) is None


TASK_VARIANTS = [
    ({"sharding": "zero3", "gpus": 8, "nodes": 2, "gpu": "h100-80gb"}, {}),  # any_of, Lambda pinned to SXM
    ({"gpu": "rtx-a6000"}, {}),
    ({"sharding": "ddp", "gpus": 2, "gpu": "a100-80gb"}, {}),  # one pinned offer
    ({"sharding": "none", "gpu": "h200"}, {"spot": True, "bucket": "my-runs"}),
    ({"sharding": "zero3-offload", "gpu": "h100-pcie"}, {"node_memory_gib": 132.2, "node_disk_gib": 164.5}),
]


@pytest.mark.parametrize(("plan_values", "option_values"), TASK_VARIANTS)
def test_the_real_skypilot_accepts_the_task(
    tmp_path: Path, plan_values: dict[str, Any], option_values: dict[str, Any]
) -> None:
    sky = pytest.importorskip("sky", reason="skypilot is an optional extra: pip install -e '.[skypilot]'")
    task = _task(make_plan(**plan_values), _options(tmp_path, **option_values))
    assert skypilot.skypilot_schema_error(task) is None
    parsed = sky.Task.from_yaml_config(copy.deepcopy(task))  # what `sky launch` builds from the file (it pops keys)
    assert parsed.num_nodes == task["num_nodes"] and set(parsed.storage_mounts) == {_options(tmp_path).output_dir}
    offers = task["resources"].get("any_of", [task["resources"]])
    assert {resources.accelerators and next(iter(resources.accelerators)) for resources in parsed.resources} == {
        offer["accelerators"].split(":")[0] for offer in offers
    }


def test_launch_writes_the_task_and_prints_sky_launch(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkout = _checkout(tmp_path, lock=True)
    monkeypatch.setattr(launch_cmd, "installed_checkout", lambda: str(checkout))
    plan = tmp_path / "plan.yaml"
    assert (
        run(capsys, "plan", "llama3-8b", "--gpu", "h100", "--num-gpus", "8", "--num-nodes", "2", "-o", str(plan))[0]
        == 0
    )
    data = tmp_path / "d.jsonl"
    data.write_text('{"text": "x"}\n')
    out = tmp_path / "runs" / "first"
    args = ["launch", str(plan), "--dataset", str(data), "--output-dir", str(out)]
    for extra, words in ((["--slurm"], "choose one"), (["--detach"], "drop --detach")):
        code, stdout, err = run(capsys, *args, "--skypilot", *extra)
        assert code == 2 and len(err.strip().splitlines()) == 1 and words in err and not out.exists(), err
    code, stdout, err = run(capsys, *args, "--skypilot")
    assert code == 0, err
    assert f"sky launch -c autotune-first {out / 'sky.yaml'}" in stdout and "not started" in stdout
    task = yaml.safe_load((out / "sky.yaml").read_text())
    assert task["num_nodes"] == 2 and task["workdir"] == str(checkout)
    assert set(task["file_mounts"]) == {str(out), str(data)}
    sharding = yaml.safe_load(plan.read_text())["setting"]["sharding"]
    backend = "deepspeed_config.json" if sharding.startswith("zero") else "accelerate_config.yaml"
    assert sorted(path.name for path in out.iterdir()) == sorted([backend, "plan.yaml", "sky.yaml"])
    assert "not checked against SkyPilot's schema" in err or "sky" in sys.modules


def test_memory_disk_and_the_output_bucket_come_from_the_plan(tmp_path: Path) -> None:
    plan = make_plan(sharding="zero3-offload", gpus=1, gpu="h100-80gb")
    options = _options(tmp_path, node_memory_gib=132.2, node_disk_gib=164.5, bucket="my-runs")
    task = _task(plan, options)
    resources = task["resources"]
    assert resources["memory"] == "133+" and resources["disk_size"] == 165  # rounded up: at least what the plan needs
    assert task["file_mounts"][options.output_dir] == {
        "name": "my-runs",
        "source": options.output_dir,
        "mode": "MOUNT_CACHED",
    }
    lock = str(Path(options.output_dir) / ".autotune.lock")
    assert f"rm -f {lock}" in task["run"]  # a lock left in the bucket by a preempted node does not stop the resume


def test_the_default_bucket_is_one_per_output_directory(tmp_path: Path) -> None:
    first = skypilot.bucket_name(_options(tmp_path, output_dir=str(tmp_path / "a" / "run")))
    again = skypilot.bucket_name(_options(tmp_path, output_dir=str(tmp_path / "a" / "run")))
    other = skypilot.bucket_name(_options(tmp_path, output_dir=str(tmp_path / "b" / "run")))
    assert first == again != other and first.startswith("autotune-run-")
    assert skypilot.BUCKET_NAME.match(first)


def test_spot_runs_as_a_managed_job_that_resumes_from_the_bucket(tmp_path: Path) -> None:
    options = _options(tmp_path, spot=True)
    spec = _spec(make_plan(sharding="none", gpu="l4"), options)
    assert spec.argv[:3] == ["sky", "jobs", "launch"] and spec.argv[-1].endswith(SKYPILOT_TASK_FILE)
    task = yaml.safe_load(spec.files[SKYPILOT_TASK_FILE])
    assert task["resources"]["use_spot"] is True
    assert "autotune.launcher.relaunch" in task["run"]  # a recovered job decides to resume as a relaunch does


@pytest.mark.parametrize(
    ("values", "words"),
    [
        ({"bucket": "My_Bucket"}, "--bucket 'My_Bucket'"),
        ({"bucket": "b;rm -rf ~"}, "--bucket"),
        ({"skypilot": False, "spot": True}, "add --skypilot"),
        ({"skypilot": False, "bucket": "runs"}, "add --skypilot"),
    ],
)
def test_bad_cloud_options_are_one_line(tmp_path: Path, values: dict[str, Any], words: str) -> None:
    with pytest.raises(InvalidRequestError, match=words) as error:
        _spec(make_plan(sharding="none", gpu="l4"), _options(tmp_path, **values))
    assert "\n" not in str(error.value)


HOSTILE = ["runs/x;touch pwned", "runs/a b", "runs/$(id)", "runs/`id`", "runs/x'y", 'runs/x"y', "runs/*", "runs/é"]


@pytest.mark.parametrize("name", HOSTILE)
@pytest.mark.parametrize("field", ["output_dir", "dataset", "eval_dataset"])
def test_no_shell_metacharacter_reaches_a_file_mounts_destination(tmp_path: Path, name: str, field: str) -> None:
    options = _options(tmp_path, **{field: str(tmp_path / name)})
    with pytest.raises(InvalidRequestError, match="SkyPilot writes mounted paths unquoted") as error:
        _spec(make_plan(sharding="none", gpu="l4"), options)
    assert "\n" not in str(error.value)


def test_every_written_destination_is_a_plain_path(tmp_path: Path) -> None:
    plan = make_plan(sharding="none", gpu="l40s").model_copy(update={"model_source": str(tmp_path / "w-1.5")})
    task = _task(plan, _options(tmp_path, eval_dataset=str(tmp_path / "eval@v2.jsonl")))
    assert all(skypilot.MOUNT_SAFE_PATH.match(destination) for destination in task["file_mounts"])


@pytest.mark.parametrize("char", ["\n", "\x85", "\u2028"])
@pytest.mark.parametrize("field", ["dataset", "eval_dataset"])
def test_a_line_break_in_the_dataset_or_eval_dataset_is_refused(tmp_path: Path, field: str, char: str) -> None:
    options = _options(tmp_path, skypilot=False, project_dir=None, **{field: f"data{char}set.jsonl"})
    with pytest.raises(InvalidRequestError, match="control character") as error:
        _spec(make_plan(sharding="none", gpu="l4"), options)
    assert f"--{field.replace('_', '-')}" in str(error.value)


def test_launch_spot_with_a_bucket_asks_for_the_plans_memory_and_disk(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkout = _checkout(tmp_path, lock=True)
    monkeypatch.setattr(launch_cmd, "installed_checkout", lambda: str(checkout))
    plan = tmp_path / "plan.yaml"
    planned = (
        "plan",
        "llama3-70b",
        "--gpu",
        "h100",
        "--method",
        "lora",
        "--sharding",
        "zero3-offload",
        "-o",
        str(plan),
    )
    assert run(capsys, *planned)[0] == 0
    host_gib = yaml.safe_load(plan.read_text())["prediction"]["host_memory_gib"]
    data = tmp_path / "d.jsonl"
    data.write_text('{"text": "x"}\n')
    out = tmp_path / "runs" / "spot"
    args = ["launch", str(plan), "--dataset", str(data), "--output-dir", str(out), "--skypilot"]
    code, stdout, err = run(capsys, *args, "--spot", "--bucket", "my-runs")
    assert code == 0, err
    assert f"sky jobs launch -n autotune-spot {out / 'sky.yaml'}" in stdout
    task = yaml.safe_load((out / "sky.yaml").read_text())
    resources = task["resources"]
    assert host_gib > 100 and int(resources["memory"].rstrip("+")) >= host_gib  # the offload's host RAM
    assert resources["disk_size"] > 131  # at least the 70B model's 16-bit weights (131 GiB)
    assert resources["use_spot"] is True and task["file_mounts"][str(out)]["name"] == "my-runs"


def test_launch_refuses_a_hostile_output_dir_before_writing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkout = _checkout(tmp_path, lock=True)
    monkeypatch.setattr(launch_cmd, "installed_checkout", lambda: str(checkout))
    plan = tmp_path / "plan.yaml"
    assert run(capsys, "plan", "llama3-8b", "--gpu", "l4", "-o", str(plan))[0] == 0
    data = tmp_path / "d.jsonl"
    data.write_text('{"text": "x"}\n')
    out = tmp_path / "runs" / "x;touch pwned"
    code, _, err = run(capsys, "launch", str(plan), "--dataset", str(data), "--output-dir", str(out), "--skypilot")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "';'" in err, err
    assert not out.exists()
