"""Shared pydantic base classes: strict (unknown keys rejected) and frozen where values are facts."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """A user-facing schema: unknown keys are an error (accelerate's habit), values are validated."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class FrozenModel(BaseModel):
    """A catalog fact: unknown keys are an error and instances are immutable and hashable."""

    model_config = ConfigDict(extra="forbid", frozen=True)
