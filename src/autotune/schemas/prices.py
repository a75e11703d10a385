"""The GPU price table: public on-demand list prices per GPU-hour, each with its provider, date and source.

Shipped as ``autotune/profiles/prices.yaml``; a user file ``prices.yaml`` in the config dir replaces it (same
schema). Read by :mod:`autotune.profiles.prices`.
"""

from __future__ import annotations

import datetime
from typing import Annotated

from pydantic import Field, model_validator

from autotune.schemas._base import FrozenModel

MAX_PRICE_PER_GPU_HOUR = 1e6
"""Largest price per GPU-hour a table or ``--price`` may give, in its currency. Not a judgement of prices (the dearest
list price in the shipped table is under 10 USD; a weak currency's is a few thousand): a bound that keeps every cost
(GPU-hours × price) a finite number, so a typo such as ``1e308`` is one line, not an overflow."""

PricePerGpuHour = Annotated[float, Field(gt=0, le=MAX_PRICE_PER_GPU_HOUR, strict=True)]
"""A price per GPU-hour: a number (strict: ``true`` is not 1.0), positive, at most :data:`MAX_PRICE_PER_GPU_HOUR`."""


class Provider(FrozenModel):
    """One provider whose list prices the table quotes."""

    name: str = Field(description="Provider and offer, e.g. 'RunPod Secure Cloud'.")
    url: str = Field(description="The provider's public pricing page (every price of this provider's is read there).")
    checked: datetime.date | None = Field(
        default=None, description="The day its prices were read (YYYY-MM-DD; default: the table's date)."
    )


class GpuPrices(FrozenModel):
    """One GPU's prices, USD per GPU-hour: per provider, and the typical figure the planner uses."""

    typical: PricePerGpuHour = Field(
        description="The price the planner uses, per GPU-hour (the shipped table: the providers' median)."
    )
    providers: dict[str, PricePerGpuHour] = Field(
        default_factory=dict, description="Provider key -> on-demand list price, USD per GPU-hour."
    )


class PriceTable(FrozenModel):
    """A price table: on-demand list prices per GPU-hour for catalog GPUs, in one currency, read on one date."""

    currency: str = Field(default="USD", description="The currency of every price (one currency).")
    date: datetime.date = Field(description="The day the prices were read (YYYY-MM-DD).")
    source: str = Field(description="Where the numbers come from (pages, datasets with commit).")
    providers: dict[str, Provider] = Field(default_factory=dict, description="Provider key -> provider.")
    gpus: dict[str, GpuPrices] = Field(description="Catalog GPU key -> its prices.")

    @model_validator(mode="after")
    def _known_providers(self) -> PriceTable:
        for gpu, prices in self.gpus.items():
            unknown = sorted(set(prices.providers) - set(self.providers))
            if unknown:
                raise ValueError(f"gpus.{gpu}: provider {', '.join(unknown)} is not listed under providers")
        return self
