"""The runtime guard's pure checks (``trainer/guard.py``), in-process over a stand-in prepared Trainer.

The contract: what runs is compared with the plan, and the first mismatch raises :class:`RuntimeGuardError` naming
the plan field, the planned and the actual value. The stand-in holds what the guard reads after ``prepare``: the
world size, the accelerator's distributed type, the model and its wrapper. (The real Trainer's checkpointing and
attention are tests/integration/test_guard.py's.)
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("peft")

import torch
from plans import make_plan

from autotune.errors import RuntimeGuardError
from autotune.schemas.plan import PlanFile
from autotune.trainer.guard import check_runtime, checkpointing_runs


def _model(attention: str = "sdpa") -> torch.nn.Module:
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 2))
    model.config = SimpleNamespace(_attn_implementation=attention)  # type: ignore[assignment]
    return model


def _trainer(model: torch.nn.Module, world_size: int = 1, distributed: str = "NO", wrapped: Any = None) -> Any:
    return SimpleNamespace(
        args=SimpleNamespace(world_size=world_size),
        accelerator=SimpleNamespace(distributed_type=distributed, state=SimpleNamespace()),
        model=model,
        model_wrapped=model if wrapped is None else wrapped,
    )


FULL = make_plan(method="full", grad_ckpt=False)


def _refused(trainer: Any, plan: PlanFile) -> str:
    with pytest.raises(RuntimeGuardError) as error:
        check_runtime(trainer, plan)
    assert "\n" not in str(error.value)
    return str(error.value)


def test_a_run_that_is_the_plan_passes() -> None:
    check_runtime(_trainer(_model()), FULL)


def test_another_number_of_processes_is_refused() -> None:
    message = _refused(_trainer(_model(), world_size=2), FULL)
    assert "the plan is for 1 GPU(s)" in message and "2 process(es) run" in message


def test_a_global_batch_that_is_not_the_plans_is_refused() -> None:
    plan = make_plan(method="full", grad_ckpt=False, workload={"global_batch_size": 16})
    assert "= 8 sequences per step, but the plan's global_batch_size is 16" in _refused(_trainer(_model()), plan)


@pytest.mark.parametrize("distributed", ["FSDP", "DEEPSPEED"])
def test_an_unsharded_plan_running_sharded_is_refused(distributed: str) -> None:
    assert f"sharding=none but the run uses {distributed}" in _refused(
        _trainer(_model(), distributed=distributed), FULL
    )


def test_an_fsdp_plan_that_fell_back_to_ddp_is_refused() -> None:
    plan = make_plan(sharding="fsdp", gpus=2, method="full", grad_ckpt=False)
    message = _refused(_trainer(_model(), world_size=2, distributed="MULTI_CPU"), plan)
    assert "FSDP is not active (distributed type MULTI_CPU, no FSDP-wrapped modules)" in message
    assert "fell back to DDP" in message


def test_a_ddp_plan_whose_model_is_not_wrapped_is_refused() -> None:
    plan = make_plan(sharding="ddp", gpus=2, method="full", grad_ckpt=False)
    message = _refused(_trainer(_model(), world_size=2, distributed="MULTI_CPU"), plan)
    assert "not wrapped in DistributedDataParallel" in message


@pytest.mark.parametrize(("planned", "runs"), [(3, 2), (2, 3)])
def test_deepspeed_running_another_zero_stage_is_refused(planned: int, runs: int) -> None:
    plan = make_plan(sharding=f"zero{planned}", gpus=2, method="full", grad_ckpt=False)
    engine = SimpleNamespace(zero_optimization_stage=lambda: runs)
    trainer = _trainer(_model(), world_size=2, distributed="DEEPSPEED")
    trainer.deepspeed = engine
    assert f"(ZeRO stage {planned}) but DeepSpeed runs ZeRO stage {runs}" in _refused(trainer, plan)


def test_a_compiled_model_not_planned_so_is_refused() -> None:
    model = _model()
    message = _refused(_trainer(model, wrapped=torch.compile(model)), FULL)  # wrapped, never called: nothing compiles
    assert message == "the plan says compile=False but the model that trains is compiled"


def test_checkpointing_is_seen_on_any_module_and_compared_with_the_plan() -> None:
    model = _model()
    assert not checkpointing_runs(_trainer(model))
    layer: Any = model.get_submodule("1")
    layer.gradient_checkpointing = True  # transformers' switch, on a layer
    assert checkpointing_runs(_trainer(model))
    assert "grad_ckpt=False but activation checkpointing is on" in _refused(_trainer(model), FULL)


def test_another_attention_implementation_is_refused() -> None:
    assert "attention_impl=sdpa but the model runs attention with eager" in _refused(_trainer(_model("eager")), FULL)


def test_full_fine_tuning_with_a_frozen_tensor_is_refused() -> None:
    model = _model()
    dict(model.named_parameters())["0.bias"].requires_grad_(False)
    assert "method=full but 1 tensors are frozen (e.g. 0.bias)" in _refused(_trainer(model), FULL)


def test_lora_trains_its_adapters_and_nothing_else() -> None:
    from peft import LoraConfig, get_peft_model

    plan = make_plan(method="lora", grad_ckpt=False)
    plain = _model()
    assert "no trainable LoRA adapters" in _refused(_trainer(plain), plan)
    adapted = get_peft_model(_model(), LoraConfig(r=2, target_modules=["0"]))
    adapted.config = plain.config
    check_runtime(_trainer(adapted), plan)
    next(p for n, p in adapted.named_parameters() if n.endswith("1.weight")).requires_grad_(True)
    assert "1 non-adapter tensors train (e.g. base_model.model.1.weight)" in _refused(_trainer(adapted), plan)
