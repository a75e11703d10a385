"""Which fused kernels the core applies (``trainer/kernels.py``), without Liger Kernel installed.

The refusal rule is the setting's (:func:`autotune.schemas.setting.kernels_run_error`); here: the core asks it with
what this machine has (no GPU visible counts as the CPU; the package found or not), refuses in one line, and applies
Liger through its per-instance entry point only for a model type Liger's own table lists. Liger's module is a stand-in
put in ``sys.modules`` (the package itself pulls a CUDA build of torch).
"""

from __future__ import annotations

import sys
import types
from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("torch")

import torch

from autotune.errors import ConfigError
from autotune.schemas.setting import TrainingSetting
from autotune.trainer import kernels
from autotune.trainer.kernels import LIGER_OPTIONS, apply_kernels, check_kernels_runnable

LIGER = TrainingSetting(kernels="liger")


def test_no_kernels_are_always_runnable_and_apply_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "liger_kernel", None)  # an import of it would raise
    setting = TrainingSetting()
    check_kernels_runnable(setting, cpu=True)
    apply_kernels(object(), setting)  # no model attribute read, no liger import


def test_liger_is_refused_on_the_cpu_and_where_no_gpu_is_visible(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="cannot run on the CPU"):
        check_kernels_runnable(LIGER, cpu=True)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ConfigError, match="cannot run on the CPU"):
        check_kernels_runnable(LIGER, cpu=False)


@pytest.mark.parametrize(
    ("installed", "loss_impl", "message"),
    [
        (False, "fp32-upcast", "needs the Liger Kernel package"),
        (True, "chunked", "loss_impl=chunked also replaces"),
        (True, "fp32-upcast", None),
    ],
)
def test_on_a_gpu_liger_needs_its_package_and_not_the_chunked_loss(
    monkeypatch: pytest.MonkeyPatch, installed: bool, loss_impl: str, message: str | None
) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(kernels, "kernels_installed", lambda name: installed)
    setting = LIGER.model_copy(update={"loss_impl": loss_impl})
    if message is None:
        check_kernels_runnable(setting, cpu=False)
        return
    with pytest.raises(ConfigError, match=message) as error:
        check_kernels_runnable(setting, cpu=False)
    assert "\n" not in str(error.value)


@pytest.fixture
def liger_calls(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """A stand-in ``liger_kernel.transformers.monkey_patch`` that knows the llama type and records its calls."""
    calls: list[dict[str, Any]] = []
    monkey_patch = types.ModuleType("liger_kernel.transformers.monkey_patch")
    monkey_patch.MODEL_TYPE_TO_APPLY_LIGER_FN = {"llama": object()}  # type: ignore[attr-defined]
    monkey_patch._apply_liger_kernel_to_instance = lambda **kwargs: calls.append(kwargs)  # type: ignore[attr-defined]
    for name in ("liger_kernel", "liger_kernel.transformers"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, monkey_patch.__name__, monkey_patch)
    return calls


def test_liger_patches_a_model_type_it_lists_with_the_fused_linear_loss(liger_calls: list[dict[str, Any]]) -> None:
    model = SimpleNamespace(config=SimpleNamespace(model_type="llama"))
    apply_kernels(model, LIGER)
    assert liger_calls == [{"model": model, **LIGER_OPTIONS}]
    assert LIGER_OPTIONS["fused_linear_cross_entropy"] and not LIGER_OPTIONS["cross_entropy"]  # one loss, not two


def test_liger_refuses_a_model_type_it_does_not_list(liger_calls: list[dict[str, Any]]) -> None:
    with pytest.raises(ConfigError, match="no kernels for model type 'mamba'"):
        apply_kernels(SimpleNamespace(config=SimpleNamespace(model_type="mamba")), LIGER)
    assert liger_calls == []
