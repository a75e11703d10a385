"""The core's stochastic rounding lever (``trainer/rounding.py``): torchao's AdamW, refused in one line without it."""

from __future__ import annotations

import importlib.util

import pytest

pytest.importorskip("torch")

from autotune.errors import ConfigError
from autotune.schemas.setting import TrainingSetting
from autotune.trainer.rounding import check_rounding_runnable, rounded_optimizer

TORCHAO = importlib.util.find_spec("torchao") is not None


@pytest.mark.skipif(TORCHAO, reason="torchao is installed here: the refusal cannot be reached")
def test_rounding_without_torchao_is_refused_before_anything() -> None:
    with pytest.raises(ConfigError, match=r'needs torchao: pip install -e "\.\[fp8\]"'):
        check_rounding_runnable(TrainingSetting(method="full", bf16_stochastic_rounding=True))


def test_without_the_lever_the_trainer_builds_its_own_optimizer() -> None:
    from transformers import TrainingArguments

    setting = TrainingSetting(method="full")
    check_rounding_runnable(setting)
    assert rounded_optimizer(setting, TrainingArguments(output_dir="unused", report_to=[])) is None


@pytest.mark.skipif(not TORCHAO, reason="torchao is not installed (the optional extra .[fp8])")
def test_the_lever_hands_the_trainer_torchaos_rounding_adamw() -> None:
    from transformers import TrainingArguments

    setting = TrainingSetting(method="full", bf16_stochastic_rounding=True)
    args = TrainingArguments(output_dir="unused", report_to=[], learning_rate=3e-4, adam_beta2=0.95)
    built = rounded_optimizer(setting, args)
    assert built is not None
    cls, kwargs = built
    assert cls.__name__ == "_AdamW" and cls.__module__.startswith("torchao.optim")
    assert kwargs == {"lr": 3e-4, "betas": (0.9, 0.95), "eps": 1e-8, "bf16_stochastic_round": True}
