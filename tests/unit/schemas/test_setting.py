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


@pytest.mark.parametrize(
    ("num_samples", "epochs", "world", "steps"),
    [(13, 1, 1, 3), (13, 2, 1, 6), (12, 1, 1, 2), (13, 1, 2, 2), (1, 3, 4, 3), (100, 0.5, 1, 9)],
)
def test_optimizer_steps_follow_the_trainer(num_samples: int, epochs: float, world: int, steps: int) -> None:
    """mbs 2 × ga 3: ⌈epochs × ⌈⌈⌈N / world⌉ / 2⌉ / 3⌉⌉ (transformers' set_initial_training_values), not N·E / 6."""
    from autotune.schemas.setting import Workload

    setting = TrainingSetting(method="lora", micro_batch_size=2, grad_accum=3)
    workload = Workload(seq_len=32, global_batch_size=6 * world, num_samples=num_samples, epochs=epochs)
    assert workload.optimizer_steps(setting, world) == steps
    assert Workload(seq_len=32, global_batch_size=6).optimizer_steps(setting, 1) is None
