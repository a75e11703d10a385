"""The price table: the shipped file's provenance, and the precedence shipped < user file < ``--price``."""

from __future__ import annotations

import datetime
import os
import statistics
from pathlib import Path

import pytest

from autotune.errors import ConfigError, InvalidRequestError, UnknownNameError
from autotune.profiles.catalog import current_gpus, list_gpus
from autotune.profiles.prices import parse_price_option, resolve_prices, shipped_price_table, user_prices_path

USER_TABLE = """\
currency: USD
date: 2026-11-01
source: my team's negotiated rates
providers:
  us: {name: Our cloud, url: "https://example.invalid/prices"}
gpus:
  h100-80gb: {typical: 2.00, providers: {us: 2.00}}
  rtx-4090: {typical: 0.40}
"""


def test_the_shipped_table_cites_every_number_and_its_typical_is_the_median() -> None:
    table = shipped_price_table()
    assert table.currency == "USD" and table.date.isoformat() == "2026-09-25" and "@" in table.source
    catalog = {spec.key for spec in list_gpus()}
    for key, prices in table.gpus.items():
        assert key in catalog
        assert prices.providers, f"{key}: a price with no provider"
        assert prices.typical == round(statistics.median(prices.providers.values()), 2), key
    for provider in table.providers.values():
        assert provider.url.startswith("https://")


def test_precedence_shipped_then_user_file_then_price_option() -> None:
    shipped = resolve_prices()
    assert shipped.price("h100-80gb") == shipped_price_table().gpus["h100-80gb"].typical
    assert "shipped list prices read 2026-09-25" in shipped.describe()
    assert shipped.price("rtx-3090") is None  # no cited price: none
    path = user_prices_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(USER_TABLE, encoding="utf-8")
    user = resolve_prices()
    assert user.per_gpu_hour == {"h100-80gb": 2.00, "rtx-4090": 0.40}  # the user file replaces the table whole
    assert f"user file {path} read 2026-11-01" in user.describe()
    both = resolve_prices(["h100=2.49"])
    assert both.price("h100-80gb") == 2.49 and both.price("rtx-4090") == 0.40
    assert both.describe().endswith("--price h100-80gb=2.49")


def test_the_user_file_follows_the_config_dir() -> None:
    assert user_prices_path() == Path(os.environ["AUTOTUNE_CONFIG_DIR"]) / "prices.yaml"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (USER_TABLE.replace("rtx-4090", "rtx-4099"), "unknown GPU 'rtx-4099': closest are rtx-4090"),
        (USER_TABLE.replace("h100-80gb", "h100-sxm"), "'h100-sxm' is an alias; use the catalog key h100-80gb"),
        (USER_TABLE.replace("typical: 0.40", "typical: -1"), "typical"),
        (USER_TABLE.replace("{us: 2.00}", "{them: 2.00}"), "provider them is not listed"),
        (USER_TABLE.replace("date: 2026-11-01\n", ""), "date"),
        (USER_TABLE.replace("typical: 0.40", "typical: 1.0e+308"), "less than or equal to 1000000"),
        (USER_TABLE.replace("{us: 2.00}", "{us: 1.0e+308}"), "less than or equal to 1000000"),
        (USER_TABLE.replace("typical: 0.40", "typical: true"), "typical: Input should be a valid number"),
        (USER_TABLE.replace("typical: 0.40", 'typical: "0.40"'), "typical: Input should be a valid number"),
    ],
)
def test_a_bad_user_file_is_one_line_naming_the_file(text: str, message: str) -> None:
    path = user_prices_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=message) as error:
        resolve_prices()
    assert str(path) in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize("kind", ["directory", "fifo", "dangling link"])
def test_a_user_prices_path_that_is_no_regular_file_is_refused_not_replaced_by_the_shipped_table(kind: str) -> None:
    path = user_prices_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "directory":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)  # never opened: reading a FIFO with no writer would block
    else:
        path.symlink_to(path.parent / "missing.yaml")
    with pytest.raises(ConfigError) as error:
        resolve_prices()
    message = str(error.value)
    assert str(path) in message and "\n" not in message
    assert ("link to nothing" if kind == "dangling link" else "not a regular file") in message


def test_a_whole_number_price_is_a_price() -> None:
    path = user_prices_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(USER_TABLE.replace("typical: 0.40", "typical: 1"), encoding="utf-8")
    assert resolve_prices().price("rtx-4090") == 1.0


@pytest.mark.parametrize(
    "value", ["h100=0", "h100=-2", "h100=abc", "h100=nan", "h100=inf", "h100=", "h100", "=2", "h100=1e308", "h100=2e6"]
)
def test_a_price_that_is_not_a_positive_number_is_refused(value: str) -> None:
    with pytest.raises(InvalidRequestError, match="--price"):
        parse_price_option(value)


def test_a_price_for_an_unknown_gpu_names_the_closest() -> None:
    with pytest.raises(UnknownNameError, match="--price 'h10x=2': unknown GPU 'h10x': closest are h100-80gb"):
        parse_price_option("h10x=2")
    assert parse_price_option(" 4090 = 0.5") == ("rtx-4090", 0.5)


def test_current_gpus_are_datacenter_and_workstation_cards_of_current_architectures() -> None:
    specs = current_gpus()
    assert [spec.key for spec in specs] == sorted(
        ["h200", "h100-80gb", "h100-pcie", "l40s", "l4", "rtx-pro-6000", "rtx-6000-ada", "mi300x"]
    )
    for spec in specs:
        assert spec.architecture.startswith(("Hopper", "Ada Lovelace", "Blackwell", "CDNA 3")), spec.key
        assert "GeForce" not in spec.name and "Radeon" not in spec.name, spec.key


def test_every_shipped_price_names_its_page_and_capture_date() -> None:
    table = shipped_price_table()
    prices = resolve_prices()
    for key, gpu_prices in table.gpus.items():
        source = prices.sources[key]
        for provider_key, price in gpu_prices.providers.items():
            provider = table.providers[provider_key]
            assert provider.checked is not None, provider_key
            assert f"{provider_key} {price:g} ({provider.url}, read {provider.checked.isoformat()})" in source
    assert {"b200", "gh200"} <= set(table.gpus)


def test_the_tables_age_is_said_past_sixty_days() -> None:
    prices = resolve_prices()
    read = shipped_price_table().date
    assert "days old" not in prices.describe(today=read + datetime.timedelta(days=60))
    old = prices.describe(today=read + datetime.timedelta(days=61))
    assert "(61 days old: list prices move" in old and "--price GPU=PRICE" in old


def test_a_price_option_says_it_is_the_source() -> None:
    assert resolve_prices(["h100=2.49"]).sources["h100-80gb"] == "--price h100-80gb=2.49"
