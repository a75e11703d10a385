"""Launch specs compared with golden files (``AUTOTUNE_UPDATE_GOLDEN=1`` rewrites them).

Each case has a directory under ``golden/``: ``command.txt`` (the argv, shell-quoted), ``env.json``,
``notes.txt`` (if any) and every file the spec writes except ``plan.yaml`` (checked by the plan I/O
tests; its content follows the schemas, which other engineers extend).
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Any

import pytest
from plans import make_plan

from autotune.launcher import LaunchOptions, LaunchSpec, build_launch_spec
from autotune.schemas.plan import PlanFile
from autotune.schemas.plan_io import plan_from_yaml

GOLDEN_DIR = Path(__file__).parent / "golden"
UPDATE = os.environ.get("AUTOTUNE_UPDATE_GOLDEN") == "1"

DATA = "/data/alpaca.jsonl"

CASES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "single-gpu-lora": (
        {"sharding": "none", "gpus": 1, "method": "lora", "lora_rank": 8},
        {"output_dir": "/runs/lora"},
    ),
    "ddp-4gpu": (
        {"sharding": "ddp", "gpus": 4, "method": "lora", "grad_ckpt": False},
        {"output_dir": "/runs/ddp", "max_steps": 100, "seed": 7},
    ),
    "ddp-2x4-node0": (
        {"sharding": "ddp", "gpus": 4, "nodes": 2, "method": "qlora", "gpu": "a100-80gb"},
        {
            "output_dir": "/runs/ddp2",
            "node_rank": 0,
            "main_process_ip": "10.0.0.1",
            "main_process_port": 6000,
        },
    ),
    "fsdp-8gpu": (
        {"sharding": "fsdp", "gpus": 8, "method": "full", "precision": "bf16-mixed", "gpu": "a100-80gb"},
        {"output_dir": "/runs/fsdp", "dataset_format": "chat", "learning_rate": 1e-5},
    ),
    "fsdp-offload-2x8": (
        {"sharding": "fsdp-offload", "gpus": 8, "nodes": 2, "method": "full", "gpu": "a100-40gb"},
        {"output_dir": "/runs/fsdp-off", "node_rank": 1, "main_process_ip": "10.0.0.1"},
    ),
    "fsdp-offload-2x8-slurm": (
        {"sharding": "fsdp-offload", "gpus": 8, "nodes": 2, "method": "full", "gpu": "a100-40gb"},
        {"output_dir": "/shared/runs/fsdp off", "slurm": True},
    ),
    "zero3-offload-4gpu": (
        {"sharding": "zero3-offload", "gpus": 4, "method": "full", "micro_batch_size": 1, "grad_accum": 16},
        {"output_dir": "/runs/z3o", "max_steps": 50, "save_steps": 10, "warmup_ratio": 0.1},
    ),
    "zero2-8gpu": (
        {"sharding": "zero2", "gpus": 8, "method": "lora", "precision": "fp16-mixed", "gpu": "v100-32gb"},
        {"output_dir": "/runs/z2", "logging_steps": 5},
    ),
    "cpu-ddp-2proc": (
        {"sharding": "ddp", "gpus": 2, "method": "lora", "precision": "fp32"},
        {"output_dir": "/tmp/run-ddp", "cpu": True, "max_steps": 4},
    ),
    "cpu-zero3-2proc": (
        {"sharding": "zero3", "gpus": 2, "method": "full", "precision": "fp32"},
        {"output_dir": "/tmp/run-z3", "cpu": True, "resume": True},
    ),
}


def case_spec(name: str) -> tuple[PlanFile, LaunchSpec]:
    plan_values, option_values = CASES[name]
    plan = make_plan(**plan_values)
    return plan, build_launch_spec(plan, LaunchOptions(dataset=DATA, **option_values))


def rendered(spec: LaunchSpec) -> dict[str, str]:
    files = {
        "command.txt": shlex.join(spec.argv) + "\n",
        "env.json": json.dumps(spec.env, indent=2, sort_keys=True) + "\n",
    }
    if spec.notes:
        files["notes.txt"] = "".join(note + "\n" for note in spec.notes)
    files.update({name: content for name, content in spec.files.items() if name != "plan.yaml"})
    return files


@pytest.mark.parametrize("name", sorted(CASES))
def test_spec_matches_golden(name: str) -> None:
    _, spec = case_spec(name)
    actual = rendered(spec)
    case_dir = GOLDEN_DIR / name
    if UPDATE:
        case_dir.mkdir(parents=True, exist_ok=True)
        for stale in case_dir.iterdir():
            stale.unlink()
        for file_name, content in actual.items():
            (case_dir / file_name).write_text(content, encoding="utf-8")
    assert case_dir.is_dir(), f"no golden files for {name}: run with AUTOTUNE_UPDATE_GOLDEN=1"
    expected = {path.name: path.read_text(encoding="utf-8") for path in case_dir.iterdir()}
    assert sorted(actual) == sorted(expected)
    for file_name, content in expected.items():
        assert actual[file_name] == content, f"{name}/{file_name} differs from the golden file"


@pytest.mark.parametrize("name", sorted(CASES))
def test_spec_plan_file_is_the_plan(name: str) -> None:
    plan, spec = case_spec(name)
    assert plan_from_yaml(spec.files["plan.yaml"], "plan.yaml") == plan


def test_no_stale_golden_directories() -> None:
    assert sorted(path.name for path in GOLDEN_DIR.iterdir() if path.is_dir()) == sorted(CASES)
