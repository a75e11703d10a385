"""Shared pydantic base classes: strict (unknown keys rejected) and frozen where values are facts.

Both refuse NaN and ±infinity in every float field (``allow_inf_nan=False``): one validation layer
for every number a user or a file gives, so ``--lora-alpha inf`` or a config with
``final_logit_softcapping: NaN`` is an error, not a plan that "fits", and ``--json`` never prints
``NaN`` / ``Infinity`` (which are not JSON).

Both defer building their validator to the first validation (``defer_build=True``): importing a schema module
costs only the class, so a command pays for the schemas it validates, not for every schema it imports
(``autotune plan``'s cold start). Validation itself is unchanged.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """A user-facing schema: unknown keys are an error (accelerate's habit), values are validated."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False, defer_build=True)


class FrozenModel(BaseModel):
    """A catalog fact: unknown keys are an error and instances are immutable and hashable."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, defer_build=True)
