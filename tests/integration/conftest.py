"""Fixtures for the integration tests: a tiny Llama with an offline tokenizer, and plans for it.

Nothing downloads: the model is a 2-layer LlamaConfig with random weights saved with
``save_pretrained``; the tokenizer is a WordLevel model trained on the test text with the
``tokenizers`` library (see ``trainer_helpers``).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
from trainer_helpers import TINY, PlanWriter, build_plan_file, build_tokenizer

TRAINING_STACK = ("torch", "transformers", "peft", "accelerate", "datasets")
if any(importlib.util.find_spec(name) is None for name in TRAINING_STACK):
    # These tests run the training core; a dev-only install (pip install -e ".[dev]", no train extra) has no
    # training stack, so they are not collected there (CI installs the train extra and runs them all).
    collect_ignore_glob = ["test_*.py"]


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer Llama (hidden 64) with random weights and a word-level tokenizer, saved to a directory."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    path = tmp_path_factory.mktemp("tiny-llama")
    tokenizer = build_tokenizer()
    tokenizer.save_pretrained(path)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=False,
        **TINY,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(path)
    return path


@pytest.fixture
def write_plan(tiny_model_dir: Path, tmp_path: Path) -> PlanWriter:
    """Return ``write(num_gpus=1, seq_len=32, name="plan.yaml", **setting_fields) -> plan path``."""

    def write(num_gpus: int = 1, seq_len: int = 32, name: str = "plan.yaml", **fields: Any) -> Path:
        return build_plan_file(tiny_model_dir, tmp_path / name, num_gpus=num_gpus, seq_len=seq_len, **fields)

    return write
