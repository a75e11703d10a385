"""The command line as a user meets it: output shapes, bad input → one line and exit code 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_runner import run


def test_plan_json_has_prediction_alternatives_and_rejections(capsys):
    code, out, _ = run(capsys, "plan", "llama3-8b", "--gpu", "4090", "--seq-len", "2048", "--json")
    assert code == 0
    data = json.loads(out)
    plan = data["plan"]
    for key in (
        "peak_memory_gib",
        "peak_reserved_gib",
        "memory_breakdown_gib",
        "micro_step_time_s",
        "step_time_s",
        "tokens_per_s",
        "fits",
        "gpu_memory_gib",
    ):
        assert key in plan
    assert plan["fits"] is True and plan["peak_memory_gib"] < 24
    assert isinstance(data["alternatives"], list) and isinstance(data["rejected"], list)


def test_estimate_json_fields(capsys):
    code, out, _ = run(
        capsys,
        "estimate",
        "llama3-8b",
        "--gpu",
        "h100",
        "--num-gpus",
        "1",
        "--method",
        "lora",
        "--seq-len",
        "4096",
        "--micro-batch-size",
        "2",
        "--grad-accum",
        "8",
        "--json",
    )
    assert code == 0
    data = json.loads(out)
    assert data["setting"]["grad_accum"] == 8
    assert data["step_time_s"] == pytest.approx(8 * data["micro_step_time_s"] + data["optimizer_time_s"])
    assert sum(data["memory_breakdown_gib"].values()) == pytest.approx(data["peak_memory_gib"], abs=0.01)


def test_plan_writes_a_plan_file_and_refuses_to_overwrite(capsys, tmp_path: Path):
    target = tmp_path / "plan.yaml"
    code, _, _ = run(capsys, "plan", "llama3-8b", "--gpu", "4090", "-o", str(target))
    assert code == 0 and target.is_file()
    before = target.read_text()
    code, _, err = run(capsys, "plan", "llama3-8b", "--gpu", "4090", "--seq-len", "512", "-o", str(target))
    assert code == 2 and target.read_text() == before
    assert len(err.strip().splitlines()) == 1


def test_catalog_listings(capsys):
    code, out, _ = run(capsys, "gpus", "--json")
    assert code == 0 and any(g["key"] == "rtx-4090" for g in json.loads(out))
    code, out, _ = run(capsys, "models", "--json")
    assert code == 0 and any(m["key"] == "llama3-8b" and m["total_params"] == 8_030_261_248 for m in json.loads(out))


def test_model_from_config_json(capsys, tmp_path: Path):
    config = {
        "model_type": "llama",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "vocab_size": 128256,
        "max_position_embeddings": 8192,
        "tie_word_embeddings": False,
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    code, out, _ = run(capsys, "estimate", str(tmp_path), "--gpu", "4090", "--json")
    assert code == 0
    from_catalog = run(capsys, "estimate", "llama3-8b", "--gpu", "4090", "--json")[1]
    assert json.loads(out)["peak_memory_gib"] == json.loads(from_catalog)["peak_memory_gib"]


BAD_INPUTS = [
    (["plan", "llama9-8b", "--gpu", "4090"], "llama"),
    (["plan", "llama3-8b", "--gpu", "rtx4080"], "rtx-4090"),
    (["plan", "llama3-8b", "--gpu", "4090", "--seq-len", "0"], "--seq-len"),
    (["plan", "llama3-8b", "--gpu", "4090", "--num-gpus", "-1"], "--num-gpus"),
    (["plan", "llama3-8b", "--gpu", "4090", "--global-batch-size", "100000000"], "--global-batch-size"),
    (["plan", "llama3-8b", "--gpu", "4090", "--method", "qlora", "--precision", "fp32"], "qlora"),
    (["plan", "llama3-8b", "--gpu", "7900xtx", "--method", "qlora"], "bitsandbytes"),
    (["plan", "llama3-8b", "--gpu", "7900xtx", "--optimizer", "adamw-8bit"], "bitsandbytes"),
    (
        [
            "plan",
            "llama3-8b",
            "--gpu",
            "4090",
            "--method",
            "full",
            "--sharding",
            "zero3-offload",
            "--host-memory-gib",
            "8",
        ],
        "host RAM",
    ),
    (["plan", "llama3-8b", "--gpu", "4090", "--method", "fine"], "method"),
    (["plan", "llama3-8b", "--gpu", "4090", "--lora-targets", "q_proj,w_proj"], "w_proj"),
    (["plan", "llama3-8b", "--gpu", "4090", "--objective", "cheap"], "objective"),
    (["plan", "llama3-8b", "--gpu", "4090", "--bogus"], "bogus"),
    (["estimate", "/nonexistent/config.json", "--gpu", "4090"], "no such file"),
    (
        [
            "estimate",
            "llama3-8b",
            "--gpu",
            "a100",
            "--num-gpus",
            "2",
            "--sharding",
            "ddp",
            "--grad-accum",
            "4",
            "--grad-sync",
            "every-micro-step",
        ],
        "applies to FSDP",
    ),
    (["estimate", "llama3-8b", "--gpu", "a100", "--grad-sync", "sometimes"], "--grad-sync"),
    (["plan", "llama3-8b", "--gpu", "4090", "--grad-sync", "every-micro-step"], "applies to FSDP"),
]


@pytest.mark.parametrize(("argv", "needle"), BAD_INPUTS)
def test_bad_input_gives_one_line_and_exit_2(capsys, argv, needle):
    code, _, err = run(capsys, *argv)
    assert code == 2
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert needle.lower() in err.lower()
    assert "Traceback" not in err


def test_malformed_config_json(capsys, tmp_path: Path):
    (tmp_path / "config.json").write_text("{not json")
    code, _, err = run(capsys, "plan", str(tmp_path / "config.json"), "--gpu", "4090")
    assert code == 2 and "config.json" in err and len(err.strip().splitlines()) == 1


def test_launch_model_plans_first_and_dry_run_writes_nothing(capsys, tmp_path: Path):
    out = tmp_path / "run"
    (tmp_path / "d.jsonl").write_text('{"text": "a"}\n')  # a dry run checks the dataset too
    code, stdout, _ = run(
        capsys,
        "launch",
        "llama3-8b",
        "--gpu",
        "4090",
        "--seq-len",
        "1024",
        "--dataset",
        str(tmp_path / "d.jsonl"),
        "--output-dir",
        str(out),
        "--dry-run",
        "--cpu",  # without it the dry run probes this machine's GPU (none here)
    )
    assert code == 0
    assert "planned:" in stdout and "autotune.trainer" in stdout
    assert not out.exists()
    code, _, err = run(capsys, "launch", "llama3-8b", "--dataset", "d", "--output-dir", str(out), "--dry-run")
    assert code == 2 and "--gpu" in err and len(err.strip().splitlines()) == 1


HEAVY_PACKAGES = ("torch", "transformers", "peft", "bitsandbytes", "accelerate", "deepspeed", "datasets", "numpy")
"""What planning must never import (matplotlib too, except for --plot)."""


@pytest.mark.parametrize(
    "argv",
    [
        ["plan", "llama3-8b", "--gpu", "4090", "--json"],
        ["estimate", "llama3-8b", "--gpu", "4090", "--json"],
        ["sweep", "llama3-8b", "--gpu", "4090", "--seq-len", "1024", "--json"],
        ["launch", "llama3.2-1b", "--gpu", "4090", "--dataset", "d", "--output-dir", "RUN", "--dry-run", "--cpu"],
        ["gpus"],
        ["--help"],
    ],
    ids=lambda argv: argv[0],
)
def test_planning_does_not_import_the_training_stack(argv: list[str], tmp_path: Path) -> None:
    """A sentinel package shadows each heavy package on sys.path: any import attempt is recorded (and fails),
    so the guard holds whether or not torch & co. are installed, and a caught ImportError is still seen."""
    sentinels = tmp_path / "sentinels"
    for name in (*HEAVY_PACKAGES, "matplotlib"):
        package = sentinels / name
        package.mkdir(parents=True)
        (package / "__init__.py").write_text(
            f"import sys\nsys.stderr.write('SENTINEL-IMPORTED {name}\\n')\nraise ImportError('sentinel {name}')\n"
        )
    argv = [arg.replace("RUN", str(tmp_path / "run")) for arg in argv]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(sentinels), os.environ.get("PYTHONPATH", "")])}
    script = f"from autotune.cli.app import main\nmain({argv!r})\n"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 0, result.stderr
    imported = [line for line in result.stderr.splitlines() if line.startswith("SENTINEL-IMPORTED")]
    assert imported == [], f"autotune {argv[0]} imported: {imported}"


def test_the_sentinel_catches_an_import(tmp_path: Path) -> None:
    """The guard can fail: the same sentinel records a planted import."""
    sentinels = tmp_path / "sentinels"
    (sentinels / "torch").mkdir(parents=True)
    (sentinels / "torch" / "__init__.py").write_text(
        "import sys\nsys.stderr.write('SENTINEL-IMPORTED torch\\n')\nraise ImportError('sentinel')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(sentinels)}
    script = "try:\n    import torch\nexcept ImportError:\n    pass\n"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env)
    assert "SENTINEL-IMPORTED torch" in result.stderr
