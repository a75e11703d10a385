"""A checkpoint's adapters reloaded as the plan made them (``trainer/resume_load.py``), in-process with peft.

The contract: a single-adapter checkpoint of a peft model (no FSDP, no DeepSpeed) is reloaded into the active adapter
with the plan's ``autocast_adapter_dtype`` — bf16 adapters of ``adapter_dtype: compute`` stay bf16 and hold the saved
values, trainable — where the Trainer's own reload (peft's default) would cast them to fp32; every other case is the
Trainer's. The model is a two-layer ``nn.Sequential`` in bf16 with a LoRA adapter on its first layer; the stand-in
Trainer records when its own reload is asked.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("peft")

import torch
from peft import LoraConfig, get_peft_model
from plans import make_plan

from autotune.trainer.resume_load import PlanDtypeResumeMixin


class StandInTrainer:
    def __init__(self, model: Any, *, fsdp: bool = False, deepspeed: bool = False) -> None:
        self.model, self.is_fsdp_enabled, self.is_deepspeed_enabled = model, fsdp, deepspeed
        self.own_reloads: list[str] = []

    def _load_from_checkpoint(self, resume_from_checkpoint: str, model: Any = None) -> None:
        self.own_reloads.append(resume_from_checkpoint)


class Resuming(PlanDtypeResumeMixin, StandInTrainer):
    pass


def _adapted(seed: int) -> Any:
    torch.manual_seed(seed)
    base = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 2)).to(torch.bfloat16)
    return get_peft_model(
        base, LoraConfig(r=2, target_modules=["0"], init_lora_weights=False), autocast_adapter_dtype=False
    )


def _adapters(model: Any) -> dict[str, torch.Tensor]:
    return {name: p for name, p in model.named_parameters() if "lora_" in name}


@pytest.fixture
def checkpoint(tmp_path: Path) -> Path:
    """A checkpoint holding the bf16 adapter of seed 0."""
    _adapted(0).save_pretrained(tmp_path / "checkpoint-2")
    return tmp_path / "checkpoint-2"


@pytest.mark.parametrize(("adapter_dtype", "dtype"), [("compute", torch.bfloat16), ("fp32", torch.float32)])
def test_the_adapters_come_back_in_the_plans_dtype_with_the_saved_values(
    checkpoint: Path, adapter_dtype: str, dtype: torch.dtype
) -> None:
    saved = {name: p.detach().clone() for name, p in _adapters(_adapted(0)).items()}
    trainer = Resuming(_adapted(1))  # other adapter values before the reload
    trainer.autotune_plan = make_plan(method="lora", precision="bf16", adapter_dtype=adapter_dtype)
    trainer._load_from_checkpoint(str(checkpoint))
    assert trainer.own_reloads == []
    reloaded = _adapters(trainer.model)
    assert set(reloaded) == set(saved)
    for name, param in reloaded.items():
        assert param.dtype == dtype and param.requires_grad, name
        assert torch.equal(param.detach().to(torch.bfloat16), saved[name]), name


@pytest.mark.parametrize("case", ["fsdp", "deepspeed", "no-adapter-file", "not-peft"])
def test_every_other_case_is_the_trainers_own_reload(checkpoint: Path, tmp_path: Path, case: str) -> None:
    model: Any = torch.nn.Linear(2, 2) if case == "not-peft" else _adapted(1)
    trainer = Resuming(model, fsdp=case == "fsdp", deepspeed=case == "deepspeed")
    trainer.autotune_plan = make_plan(method="lora", precision="bf16", adapter_dtype="compute")
    target = tmp_path / "full-weights" if case == "no-adapter-file" else checkpoint
    target.mkdir(exist_ok=True)
    before = {name: p.detach().clone() for name, p in _adapters(model).items()}
    trainer._load_from_checkpoint(str(target))
    assert trainer.own_reloads == [str(target)]
    assert all(torch.equal(p, before[name]) for name, p in _adapters(model).items())  # nothing loaded here
