"""What backs a prediction (``profiles/evidence.yaml``): our core's runs, public stacks' runs, public MFU caps.

Read by :mod:`autotune.costmodel.evidence`, which labels each estimate (measured with our core / measured by a public
stack / extrapolated from the datasheet), widens the band of an extrapolated one and holds MFU at the cap.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from autotune.schemas._base import FrozenModel

ShardingClass = Literal["single", "sharded", "offload"]
Method = Literal["full", "lora", "qlora"]


class CoreRuns(FrozenModel):
    """One card our training core ran on, and the method × sharding classes it ran."""

    gpu: str = Field(description="GPU catalog key.")
    runs: dict[Method, tuple[ShardingClass, ...]] = Field(description="Method → the sharding classes run.")
    source: str = Field(description="Where the runs are kept.")


class PublicRuns(FrozenModel):
    """A GPU × method × sharding class that a public stack's timed rows measure."""

    gpu: str = Field(description="GPU catalog key.")
    method: Method
    sharding: ShardingClass
    stack: str = Field(description="The measurement rows' source table (a key of stack_time_factor).")


class MfuCap(FrozenModel):
    """The best public MFU measured on one architecture generation."""

    generation: str = Field(description="GpuSpec.generation, e.g. 'ampere'.")
    mfu: float = Field(gt=0, le=1, description="The measured MFU (fraction).")
    source: str = Field(description="The run: stack, model, GPUs, sequence length, the table's figure.")


class EvidenceTable(FrozenModel):
    """The shipped evidence table."""

    core: tuple[CoreRuns, ...]
    public: tuple[PublicRuns, ...]
    stacks: dict[str, str] = Field(description="Source table → the stack's name as printed.")
    mfu_caps: tuple[MfuCap, ...]
