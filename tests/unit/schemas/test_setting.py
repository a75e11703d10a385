"""TrainingSetting's derived switches (autotune.schemas.setting)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from autotune.schemas.setting import TrainingSetting


@pytest.mark.parametrize(
    ("sharding", "grad_ckpt", "model_checkpointing"),
    [
        ("none", True, True),
        ("zero3-offload", True, True),
        ("fsdp", True, False),
        ("fsdp-offload", True, False),
        ("none", False, False),
    ],
)
def test_fsdp_checkpoints_itself(sharding: str, grad_ckpt: bool, model_checkpointing: bool) -> None:
    """The model's own checkpointing runs unless FSDP's wraps the layers (transformers refuses both)."""
    setting = TrainingSetting(method="full", sharding=sharding, grad_ckpt=grad_ckpt)
    assert setting.model_checkpointing is model_checkpointing


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"precision": "bf16-mixed"}, "precision=bf16-mixed keeps fp32 weights"),
        ({"optimizer": "adamw-8bit"}, "not optimizer=adamw-8bit"),
        ({"sharding": "zero2"}, "not sharding=zero2"),
    ],
)
def test_stochastic_rounding_refusals(fields: dict[str, object], words: str) -> None:
    """Stochastic rounding runs on pure bf16 weights with torchao's AdamW, unsharded: one line otherwise."""
    with pytest.raises(ValidationError, match=words):
        TrainingSetting(method="full", bf16_stochastic_rounding=True, **fields)
    TrainingSetting(method="full", bf16_stochastic_rounding=True)  # pure bf16, adamw: fine


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"grad_ckpt": True}, "a checkpointed layer saves nothing"),
        ({"grad_ckpt": False, "compile": True}, "--no-compile"),
        ({"grad_ckpt": False, "sharding": "fsdp"}, "not sharding=fsdp"),
        ({"grad_ckpt": False, "precision": "bf16-mixed"}, "autocast weight cast"),
    ],
)
def test_activation_offloading_refusals(fields: dict[str, object], words: str) -> None:
    """Offloading moves each layer's saved tensors: not with checkpointing, compile, sharding or full autocast."""
    with pytest.raises(ValidationError, match=words):
        TrainingSetting(method="full", activation_offloading=True, **fields)
    TrainingSetting(method="lora", precision="bf16-mixed", grad_ckpt=False, activation_offloading=True)


def test_rounding_needs_torchao_to_run() -> None:
    from autotune.schemas.setting import stochastic_rounding_run_error

    assert stochastic_rounding_run_error(False, installed=False) is None
    assert stochastic_rounding_run_error(True, installed=True) is None
    assert 'pip install -e ".[fp8]"' in (stochastic_rounding_run_error(True, installed=False) or "")
