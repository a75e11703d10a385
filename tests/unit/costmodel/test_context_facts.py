"""The per-setting and per-device contexts: parameter facts counted once per candidate, device facts once per GPU."""

from __future__ import annotations

import importlib
import sys
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from autotune.costmodel import params
from autotune.costmodel.context import parameter_facts, setting_context
from autotune.costmodel.device import build_device_context, device_context
from autotune.costmodel.params import NO_LORA, count_params, lora_adapters, lora_module_targets, lora_params
from autotune.planner.request import PlanRequest
from autotune.profiles.catalog import resolve_gpu, resolve_model_profile
from autotune.schemas.calibration import CostCoefficients
from autotune.schemas.hardware import ClusterSpec
from autotune.schemas.setting import TrainingSetting
from autotune.schemas.workload import Workload

search_module = importlib.import_module("autotune.planner.search")

COUNTERS = (
    "count_params",
    "linear_modules",
    "lora_target_modules",
    "lora_module_targets",
    "lora_adapters",
    "lora_params",
    "lora_layout",
    "adapter_layout",
)
"""The functions of ``costmodel.params`` that count a model's or a setting's parameters."""


def _counting(original: Callable[..., Any], name: str, calls: Counter[str]) -> Callable[..., Any]:
    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[name] += 1
        return original(*args, **kwargs)

    return counted


def test_a_plans_walk_enters_each_parameter_counter_at_most_once_per_candidate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Every autotune module's reference to a counter (params' own calls between counters are one entry's work) is
    # wrapped, so any term that goes back to params for a fact the context holds is counted.
    calls: Counter[str] = Counter()
    for name in COUNTERS:
        original = getattr(params, name)
        wrapper = _counting(original, name, calls)
        for module_name, module in list(sys.modules.items()):
            if module_name.startswith("autotune.") and module is not params and getattr(module, name, None) is original:
                monkeypatch.setattr(module, name, wrapper)
    parameter_facts.cache_clear()  # the context's own cache: a fresh walk counts each model and adapter shape
    estimate = search_module.estimate_setting
    monkeypatch.setattr(search_module, "estimate_setting", _counting(estimate, "candidates", calls))

    cluster = ClusterSpec(gpu=resolve_gpu("4090")[0])
    request = PlanRequest(
        model=resolve_model_profile("llama3-8b"),
        model_source="catalog",
        cluster=cluster,
        workload=Workload(seq_len=2048, global_batch_size=32),
    )
    search_module.search(request)

    candidates = calls.pop("candidates")
    assert candidates > 100
    assert calls["count_params"] >= 1  # the wrappers sit on the walk's path
    assert calls["adapter_layout"] >= 1  # adapter candidates were walked
    over = {name: count / candidates for name, count in calls.items() if count > candidates}
    assert not over, f"calls per candidate above 1: {over}"


def test_the_context_holds_the_settings_parameter_facts() -> None:
    model = resolve_model_profile("llama3-8b")
    cluster = ClusterSpec(gpu=resolve_gpu("h100")[0])
    workload = Workload(seq_len=1024, global_batch_size=8)
    targets = ("q_proj", "v_proj")
    lora = TrainingSetting(method="lora", lora_rank=8, lora_targets=targets, micro_batch_size=2, grad_accum=4)
    context = setting_context(model, lora, cluster, workload)
    assert context.trainable_params == lora_params(model, 8, targets) == 32 * 8 * (4096 + 4096 + 4096 + 1024)
    assert context.lora.module_targets == lora_module_targets(model, targets)
    assert context.lora.adapters == lora_adapters(model, 8, targets)
    assert [m.name for m in context.linear_modules][:3] == ["q_proj", "k_proj", "v_proj"]

    full = setting_context(model, lora.model_copy(update={"method": "full"}), cluster, workload)
    assert full.lora is NO_LORA
    assert full.trainable_params == count_params(model).total_params


def test_sequences_per_step_is_micro_batch_times_accumulation_times_ranks() -> None:
    setting = TrainingSetting(method="lora", micro_batch_size=3, grad_accum=5)
    assert setting.sequences_per_step(1) == 15
    assert setting.sequences_per_step(8) == 120


@pytest.mark.parametrize(
    ("gpu", "generation"),
    [("h100", "hopper"), ("h100-pcie", "hopper"), ("4090", "ada"), ("a100-80gb", "ampere"), ("v100", "volta")],
)
def test_gpu_generation_is_the_architectures_first_word(gpu: str, generation: str) -> None:
    assert resolve_gpu(gpu)[0].generation == generation


def test_the_device_context_is_built_once_per_gpu_and_coefficients() -> None:
    gpu = resolve_gpu("h100")[0]
    coefficients = CostCoefficients()
    first = device_context(gpu, coefficients)
    assert device_context(gpu, coefficients) is first
    assert first == build_device_context(gpu, coefficients)
    # a coefficient changed in place is seen: the context is rebuilt
    coefficients.matmul_efficiency["hopper"] = coefficients.matmul_efficiency.get("hopper", 0.5) / 2
    halved = device_context(gpu, coefficients)
    assert halved is not first
    assert halved.matmul["bf16"].flops_per_s == pytest.approx(first.matmul["bf16"].flops_per_s / 2)
    other = device_context(resolve_gpu("4090")[0], coefficients)
    assert other.gpu.key == "rtx-4090" and other is not halved
