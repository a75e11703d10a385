"""Fixtures for the integration tests: a tiny Llama with an offline tokenizer, and plans for it.

Nothing downloads: the model is a 2-layer LlamaConfig with random weights saved with
``save_pretrained``; the tokenizer is a WordLevel model trained on the test text with the
``tokenizers`` library (see ``trainer_helpers``).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest
from trainer_helpers import (
    FinishedRun,
    PlanWriter,
    build_plan_file,
    instruction_rows,
    run_command,
    save_tiny_model,
    write_jsonl,
)

TRAINING_STACK = ("torch", "transformers", "peft", "accelerate", "datasets")
if any(importlib.util.find_spec(name) is None for name in TRAINING_STACK):
    # These tests run the training core; a dev-only install (pip install -e ".[dev]", no train extra) has no
    # training stack, so they are not collected there (CI installs the train extra and runs them all).
    collect_ignore_glob = ["test_*.py"]


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer Llama (hidden 64) with random weights and a word-level tokenizer, saved to a directory."""
    path = tmp_path_factory.mktemp("tiny-llama")
    save_tiny_model(path)
    return path


@pytest.fixture
def write_plan(tiny_model_dir: Path, tmp_path: Path) -> PlanWriter:
    """Return ``write(num_gpus=1, seq_len=32, name="plan.yaml", **setting_fields) -> plan path``."""

    def write(num_gpus: int = 1, seq_len: int = 32, name: str = "plan.yaml", **fields: Any) -> Path:
        return build_plan_file(tiny_model_dir, tmp_path / name, num_gpus=num_gpus, seq_len=seq_len, **fields)

    return write


@pytest.fixture(scope="session")
def finished_lora_run(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path) -> FinishedRun:
    """One LoRA run shared by the eval, tracking and export tests, which only read it: ``autotune launch`` in a
    subprocess (fp32, micro batch size 2, 40 instruction rows, 3 steps, learning rate 1e-2 so that the adapter moves
    away from its zero B), 8 rows held out (``--eval-fraction 0.2``) and evaluated every 2 steps and at the end,
    tensorboard event files, a checkpoint at step 2 and ``final/``. Under pytest-xdist its tests run on one worker
    (tests/helpers/suite_plugin.py groups the tests of a session fixture that starts the core)."""
    tmp = tmp_path_factory.mktemp("finished-lora-run")
    plan = build_plan_file(tiny_model_dir, tmp / "plan.yaml", method="lora", micro_batch_size=2, grad_accum=1)
    data = write_jsonl(tmp / "d.jsonl", instruction_rows(40))
    out = tmp / "run"
    launch = [sys.executable, "-c", "from autotune.cli.app import main; main()", "launch", str(plan), "--dataset",
              str(data), "--output-dir", str(out), "--cpu", "--max-steps", "3", "--learning-rate", "1e-2",
              "--save-steps", "2", "--eval-fraction", "0.2", "--eval-steps", "2",
              "--report-to", "tensorboard"]  # fmt: skip
    done = run_command(launch, timeout_s=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return FinishedRun(out, done)
