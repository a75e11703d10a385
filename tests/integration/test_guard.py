"""The runtime guard's checks of activation checkpointing and attention on a real tiny model (autotune.trainer.guard).

A plan's memory and time are priced with its ``grad_ckpt`` and ``attention_impl``; a run in which either is not what
the plan says would report figures of another setting, so the guard stops it (the whole core runs the guard in every
integration run, so these tests also show that a run as planned passes).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import torch
from trainer_helpers import TINY, PlanWriter

from autotune.errors import RuntimeGuardError
from autotune.schemas.plan_io import load_plan
from autotune.schemas.setting import TrainingSetting
from autotune.trainer.guard import _check_attention, _check_checkpointing, checkpointing_runs
from autotune.trainer.model import apply_method


def _tiny_llama(attention: str = "sdpa") -> Any:
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=32, tie_word_embeddings=False, attn_implementation=attention, **TINY)
    model = LlamaForCausalLM(config)
    model.config.use_cache = False
    return model


@pytest.mark.parametrize("planned", [True, False])
def test_guard_stops_a_run_whose_checkpointing_is_not_the_planned_one(write_plan: PlanWriter, planned: bool) -> None:
    plan = load_plan(write_plan(method="lora", grad_ckpt=planned))
    model = apply_method(_tiny_llama(), TrainingSetting(method="lora"))
    model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    with_ckpt = SimpleNamespace(model=model, model_wrapped=model)
    assert checkpointing_runs(with_ckpt)
    other = apply_method(_tiny_llama(), TrainingSetting(method="lora"))
    without_ckpt = SimpleNamespace(model=other, model_wrapped=other)
    assert not checkpointing_runs(without_ckpt)
    _check_checkpointing(with_ckpt if planned else without_ckpt, plan)  # as planned: no error
    with pytest.raises(RuntimeGuardError, match=f"grad_ckpt={planned} but activation checkpointing is"):
        _check_checkpointing(without_ckpt if planned else with_ckpt, plan)


def test_fsdp_style_checkpoint_wrappers_count_as_checkpointing() -> None:
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
        apply_activation_checkpointing,
        checkpoint_wrapper,
    )
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer

    model = _tiny_llama()
    assert not checkpointing_runs(SimpleNamespace(model=model, model_wrapped=model))
    apply_activation_checkpointing(
        model, checkpoint_wrapper_fn=checkpoint_wrapper, check_fn=lambda m: isinstance(m, LlamaDecoderLayer)
    )  # what accelerate does for fsdp_activation_checkpointing
    assert checkpointing_runs(SimpleNamespace(model=torch.nn.Linear(2, 2), model_wrapped=model))


def test_guard_stops_a_run_whose_attention_is_not_the_planned_one(write_plan: PlanWriter) -> None:
    plan = load_plan(write_plan(method="lora", attention_impl="sdpa"))
    _check_attention(apply_method(_tiny_llama("sdpa"), TrainingSetting(method="lora")), plan)  # peft's model too
    with pytest.raises(RuntimeGuardError, match="attention_impl=sdpa but the model runs attention with eager"):
        _check_attention(_tiny_llama("eager"), plan)
