"""GPU prices per GPU-hour: the shipped table, a user file that replaces it, and ``--price GPU=USD`` on top.

Precedence, last wins: the shipped ``profiles/prices.yaml`` < ``prices.yaml`` in the user config dir
(:func:`autotune.profiles.user_config.config_dir`: the same rule as ``calibration.yaml``; the file replaces the
shipped table whole) < ``--price`` on the command line (one GPU each). Every table is validated by
:class:`autotune.schemas.prices.PriceTable`; GPU names are resolved through the catalog, so a price for a GPU the
catalog does not know is an error naming the closest names.
"""

from __future__ import annotations

import datetime
import functools
import math
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from autotune.errors import ConfigError, InvalidRequestError, UnknownNameError
from autotune.profiles.catalog import resolve_gpu
from autotune.profiles.user_config import config_dir
from autotune.schemas.prices import MAX_PRICE_PER_GPU_HOUR, PriceTable
from autotune.yamlio import load_validated, parse_mapping, validate

USER_PRICES_FILE = "prices.yaml"
SHIPPED_PRICES_FILE = "prices.yaml"

STALE_AFTER_DAYS = 60
"""A price table read longer ago than this says its age: list prices move by tens of percent within months (RunPod
and Lambda repriced H100s between captures a few months apart), so an old table is a reason to check."""


@dataclass(frozen=True)
class Prices:
    """The prices a plan uses: catalog GPU key -> USD per GPU-hour, and where they come from.

    ``origin`` says which table (shipped / user file path) and its date; ``overridden`` the GPUs priced by
    ``--price``.
    """

    per_gpu_hour: dict[str, float]
    currency: str
    origin: str
    overridden: tuple[str, ...] = ()
    read_on: datetime.date | None = None
    """The table's date (None: no table)."""
    sources: dict[str, str] = field(default_factory=dict)
    """Catalog GPU key -> where its price comes from: each provider's price, page and capture date, or ``--price``."""

    def price(self, gpu_key: str) -> float | None:
        """USD per GPU-hour of a catalog GPU, or None when no price is known."""
        return self.per_gpu_hour.get(gpu_key)

    def age_days(self, today: datetime.date | None = None) -> int | None:
        """Days since the table was read (``today``: default the local date); None without a date."""
        if self.read_on is None:
            return None
        return ((today or datetime.date.today()) - self.read_on).days

    def describe(self, today: datetime.date | None = None) -> str:
        """One line: the currency, the table and its date, its age past :data:`STALE_AFTER_DAYS`, the overrides.

        ``today``: the date the age is counted to (default: the local date).
        """
        text = f"prices: {self.currency} per GPU-hour, {self.origin}"
        age = self.age_days(today)
        if age is not None and age > STALE_AFTER_DAYS:
            text += f" ({age} days old: list prices move; check them, or give --price GPU=PRICE or your prices.yaml)"
        if self.overridden:
            text += "; --price " + ", ".join(f"{key}={self.per_gpu_hour[key]:g}" for key in self.overridden)
        return text


@functools.cache
def shipped_price_table() -> PriceTable:
    """The shipped table ``profiles/prices.yaml`` (cached per process).

    Raises:
        ValueError: the shipped file is malformed or names a GPU the catalog lacks (a packaging bug).
    """
    text = resources.files("autotune.profiles").joinpath(SHIPPED_PRICES_FILE).read_text(encoding="utf-8")
    try:
        table = validate(PriceTable, parse_mapping(text, SHIPPED_PRICES_FILE, "a price table"), "prices", "prices")
        _check_keys(table, SHIPPED_PRICES_FILE)
    except (ConfigError, UnknownNameError) as error:
        raise ValueError(f"profiles/{SHIPPED_PRICES_FILE}: {error}") from None
    return table


def user_prices_path() -> Path:
    """Where a user's price table is read from: ``config_dir() / prices.yaml`` (need not exist)."""
    return config_dir() / USER_PRICES_FILE


def _check_keys(table: PriceTable, origin: str) -> None:
    """Every GPU key of ``table`` is a catalog key (not an alias: one spelling per file)."""
    for key in table.gpus:
        try:
            spec, _ = resolve_gpu(key)
        except UnknownNameError as error:
            raise ConfigError(f"{origin}: gpus: {error}") from None
        if spec.key != key:
            raise ConfigError(f"{origin}: gpus: '{key}' is an alias; use the catalog key {spec.key}")


def load_price_table() -> tuple[PriceTable, str]:
    """The table in force: the user's ``prices.yaml`` if it exists, else the shipped one; and a label saying which.

    Anything at the user's path (a directory, a FIFO, a link to nothing) is the user's table: it is read or refused,
    never silently replaced by the shipped one.

    Raises:
        ConfigError: the user file is not a regular file (a directory, FIFO, dangling link), unreadable, malformed,
            fails the schema or names an unknown GPU.
    """
    path = user_prices_path()
    if path.is_symlink() and not path.exists():
        raise ConfigError(
            f"price table {path} is a link to nothing: fix or remove it (the shipped prices are not used)"
        )
    if path.exists():
        table = load_validated(path, PriceTable, "price table")
        _check_keys(table, str(path))
        return table, f"user file {path} read {table.date.isoformat()}"
    table = shipped_price_table()
    return table, f"shipped list prices read {table.date.isoformat()} (typical of {_provider_names(table)})"


def _provider_names(table: PriceTable) -> str:
    return ", ".join(dict.fromkeys(provider.name.split(" ")[0] for provider in table.providers.values()))


def parse_price_option(value: str) -> tuple[str, float]:
    """``'h100=2.49'`` -> ``('h100-80gb', 2.49)``: a GPU name (resolved in the catalog) and USD per GPU-hour.

    Raises:
        InvalidRequestError: not ``GPU=NUMBER``, or the number is not positive, finite and at most
            :data:`autotune.schemas.prices.MAX_PRICE_PER_GPU_HOUR`.
        UnknownNameError: the GPU is not in the catalog (the message names the closest).
    """
    name, sep, number = value.partition("=")
    if not sep or not name.strip():
        raise InvalidRequestError(f"--price {value!r}: give GPU=PRICE, e.g. --price h100=2.49 (USD per GPU-hour)")
    try:
        price = float(number)
    except ValueError:
        price = math.nan
    if not math.isfinite(price) or price <= 0:
        raise InvalidRequestError(
            f"--price {value!r}: the price must be a positive number of USD per GPU-hour, e.g. {name.strip()}=2.49"
        )
    if price > MAX_PRICE_PER_GPU_HOUR:
        raise InvalidRequestError(
            f"--price {value!r}: at most {MAX_PRICE_PER_GPU_HOUR:g} per GPU-hour (a bound that keeps every cost "
            f"finite), e.g. {name.strip()}=2.49"
        )
    try:
        spec, _ = resolve_gpu(name)
    except UnknownNameError as error:
        raise UnknownNameError(f"--price {value!r}: {error}") from None
    return spec.key, price


def resolve_prices(options: list[str] | None = None) -> Prices:
    """The prices in force: the table (user file or shipped) with each ``--price GPU=USD`` on top.

    Raises:
        AutotuneError: a bad ``--price`` or a bad user file (one line).
    """
    overrides = dict(parse_price_option(value) for value in options or [])
    table, origin = load_price_table()
    per_gpu_hour = {key: prices.typical for key, prices in table.gpus.items()}
    per_gpu_hour.update(overrides)
    sources = {key: price_source(table, key) for key in table.gpus}
    sources.update({key: f"--price {key}={price:g}" for key, price in overrides.items()})
    return Prices(per_gpu_hour, table.currency, origin, tuple(overrides), table.date, sources)


def price_source(table: PriceTable, gpu_key: str) -> str:
    """Where ``table``'s price of ``gpu_key`` comes from, in one line.

    ``typical 2.89 = median of runpod-secure 2.89 (https://www.runpod.io/pricing, read 2026-09-25), ...``; a GPU
    priced without providers names the table's ``source`` instead.
    """
    prices = table.gpus[gpu_key]
    quotes = [
        f"{key} {price:g} ({table.providers[key].url}, read {(table.providers[key].checked or table.date).isoformat()})"
        for key, price in prices.providers.items()
    ]
    if not quotes:
        return f"typical {prices.typical:g} ({' '.join(table.source.split())}, read {table.date.isoformat()})"
    return f"typical {prices.typical:g} = median of " + ", ".join(quotes)
