"""The core's FP8 lever (``trainer/fp8.py``): refused in one line where it cannot run, a no-op where not planned."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from autotune.errors import ConfigError
from autotune.schemas.setting import TrainingSetting
from autotune.trainer.fp8 import apply_fp8, check_fp8_runnable


def test_fp8_on_the_cpu_is_refused_before_anything() -> None:
    with pytest.raises(ConfigError, match="cannot run on the CPU"):
        check_fp8_runnable(TrainingSetting(method="full", fp8=True), cpu=True)


def test_without_fp8_nothing_is_checked_or_converted() -> None:
    import torch

    setting = TrainingSetting(method="full")
    check_fp8_runnable(setting, cpu=True)
    model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.Linear(32, 32), torch.nn.Linear(32, 32))
    apply_fp8(model, setting)
    assert all(type(layer) is torch.nn.Linear for layer in model)
