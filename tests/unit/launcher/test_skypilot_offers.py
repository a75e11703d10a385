"""SkyPilot accelerator names per provider: each offer rents exactly the planned card (SXM vs PCIe).

The offers are the catalog GPUs' ``skypilot_offers``, checked against a fixture transcribed from SkyPilot's public
catalog (tests/fixtures/skypilot/catalog.yaml, with its sources and commits)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from autotune.errors import InvalidRequestError
from autotune.launcher.skypilot_offers import skypilot_resources
from autotune.profiles.catalog import list_gpus, resolve_gpu
from autotune.profiles.prices import shipped_price_table
from autotune.schemas.hardware import SkyPilotOffer

FIXTURE = Path(__file__).parents[2] / "fixtures" / "skypilot" / "catalog.yaml"
OFFERS: dict[str, tuple[SkyPilotOffer, ...]] = {
    gpu.key: gpu.skypilot_offers for gpu in list_gpus() if gpu.skypilot_offers
}
"""Catalog GPU key -> its SkyPilot offers (the GPUs SkyPilot rents)."""


def resources(gpu: str, count: int) -> dict[str, Any]:
    """The task's accelerator ``resources`` for ``count`` of the catalog GPU ``gpu``."""
    return skypilot_resources(gpu, resolve_gpu(gpu)[0], count)


@pytest.fixture(scope="module")
def catalog() -> dict[str, Any]:
    data = yaml.safe_load(FIXTURE.read_text(encoding="utf-8"))
    assert set(data["sources"]) == set(data["providers"])  # every provider's names cite their source
    return data["providers"]


def form_factor(gpu: str) -> str:
    """The card's form factor as its catalog profile names it (SXM module, else a PCIe card)."""
    spec, _ = resolve_gpu(gpu)
    text = f"{spec.name} {spec.architecture}"
    if "Grace" in text or "GH200" in text:
        return "superchip"
    if "OAM" in text or spec.key == "mi300x":
        return "oam"
    return "sxm" if "SXM" in text or spec.key == "b200" else "pcie"


def test_the_rented_cards_include_every_priced_one() -> None:
    assert {"h100-80gb", "h100-pcie", "h200", "a100-80gb", "rtx-4090", "l4", "b200", "gh200"} <= set(OFFERS)
    assert set(shipped_price_table().gpus) <= set(OFFERS)  # a card with a price can be rented through SkyPilot


@pytest.mark.parametrize("gpu", sorted(OFFERS))
def test_each_pinned_offer_is_that_card_in_the_providers_catalog(gpu: str, catalog: dict[str, Any]) -> None:
    for offer in OFFERS[gpu]:
        if offer.cloud == "runpod":
            assert catalog["runpod"].get(offer.accelerator) == form_factor(gpu), (gpu, offer)
        elif offer.cloud == "lambda":
            types = dict(offer.instance_types)
            names = {
                name for name, (accelerator, *_rest) in catalog["lambda"].items() if accelerator == offer.accelerator
            }
            forms = {catalog["lambda"][name][2] for name in names}
            if len(forms) > 1:  # the name is two cards on Lambda: the instance type must say which
                assert types, (gpu, offer)
            for count, instance in types.items() or [(None, None)]:
                if instance is None:
                    assert forms == {form_factor(gpu)}
                    continue
                assert catalog["lambda"][instance] == [offer.accelerator, count, form_factor(gpu)], (gpu, instance)
        else:
            assert offer.cloud is None
            for provider in ("runpod",):  # an open name must not be another card where the fixture lists it
                listed = catalog[provider].get(offer.accelerator)
                assert listed in (None, form_factor(gpu)), (gpu, offer, provider)


def test_runpod_h100_and_a100_names_are_pcie_and_never_rent_an_sxm_plan() -> None:
    sxm = resources("h100-80gb", 8)["any_of"]
    assert {"cloud": "runpod", "accelerators": "H100-SXM:8"} in sxm
    assert all(entry["accelerators"] != "H100:8" or entry.get("instance_type") == "gpu_8x_h100_sxm5" for entry in sxm)
    assert resources("a100-80gb", 2) == {"cloud": "runpod", "accelerators": "A100-80GB-SXM:2"}
    pcie = resources("h100-pcie", 1)["any_of"]
    assert pcie == [
        {"cloud": "runpod", "accelerators": "H100:1"},
        {"cloud": "lambda", "accelerators": "H100:1", "instance_type": "gpu_1x_h100_pcie"},
    ]


def test_h200_on_runpod_is_h200_sxm_and_lambdas_one_h100_is_pinned_to_sxm() -> None:
    h200 = resources("h200", 8)["any_of"]
    assert h200 == [{"cloud": "runpod", "accelerators": "H200-SXM:8"}, {"accelerators": "H200:8"}]
    one = resources("h100-80gb", 1)["any_of"]
    assert {"cloud": "lambda", "accelerators": "H100:1", "instance_type": "gpu_1x_h100_sxm5"} in one


def test_a_node_size_no_provider_rents_is_refused_in_one_line() -> None:
    with pytest.raises(InvalidRequestError, match=r"no provider .* rents 2× a100-40gb on one node") as error:
        resources("a100-40gb", 2)
    assert "\n" not in str(error.value)
    with pytest.raises(InvalidRequestError, match="no accelerator name for rx-7900-xtx"):
        resources("rx-7900-xtx", 1)
    with pytest.raises(InvalidRequestError, match="no accelerator name for my-card"):
        skypilot_resources("my-card", None, 1)  # not in the catalog
