"""Shared pydantic base classes: strict (unknown keys rejected) and frozen where values are facts.

Both refuse NaN and ±infinity in every float field (``allow_inf_nan=False``): one validation layer
for every number a user or a file gives, so ``--lora-alpha inf`` or a config with
``final_logit_softcapping: NaN`` is an error, not a plan that "fits", and ``--json`` never prints
``NaN`` / ``Infinity`` (which are not JSON).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """A user-facing schema: unknown keys are an error (accelerate's habit), values are validated."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)


class FrozenModel(BaseModel):
    """A catalog fact: unknown keys are an error and instances are immutable and hashable."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
