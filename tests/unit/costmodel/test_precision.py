"""autotune.costmodel.precision: the residual stream's and the weights' bytes under mixed precision."""

from __future__ import annotations

import pytest

from autotune.costmodel.precision import dtype_bytes
from autotune.profiles.catalog import resolve_gpu
from autotune.schemas.setting import TrainingSetting


@pytest.mark.parametrize(("sharding", "residual"), [("fsdp", 2.0), ("ddp", 4.0), ("zero3", 2.0)])
def test_fsdp_mixed_precision_runs_a_16_bit_residual_stream(sharding: str, residual: float) -> None:
    setting = TrainingSetting(method="full", precision="bf16-mixed", sharding=sharding)
    dtypes = dtype_bytes(setting, resolve_gpu("a100-80gb")[0])
    assert dtypes.residual_bytes == residual
    assert dtypes.weight_bytes == (2.0 if sharding == "zero3" else 4.0)  # FSDP keeps fp32 master shards
