"""TrainingSetting's derived switches (autotune.schemas.setting)."""

from __future__ import annotations

import pytest

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
