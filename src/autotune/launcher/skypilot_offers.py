"""Which SkyPilot accelerator names rent exactly the planned card, per provider (``resources`` of ``sky.yaml``).

One SkyPilot name can be two cards: RunPod's ``H100`` and ``A100-80GB`` are the PCIe cards (its SXM ones are
``H100-SXM`` and ``A100-80GB-SXM``, its H200 ``H200-SXM``), and Lambda names its PCIe and SXM H100 both ``H100``
(only the instance type, ``gpu_1x_h100_pcie`` vs ``gpu_N x_h100_sxm5``, tells them apart). An SXM plan run on a PCIe
card is slower than planned, so a card whose name is ambiguous somewhere is offered only where the fixture shows the
name to be that card: pinned to the provider (``cloud``), and on Lambda to the instance type. Where the name means the
same card everywhere SkyPilot lists it, the offer leaves the provider open.

Sources (transcribed with their commits in ``tests/fixtures/skypilot/catalog.yaml``, which the tests check this table
against): skypilot-org/skypilot ``sky/catalog/data_fetchers/fetch_runpod.py`` (RunPod's names and overrides) and
``fetch_lambda_cloud.py``; skypilot-org/skypilot-catalog ``catalogs/v7/lambda/vms.csv`` and ``runpod/vms.csv``.

Several offers become SkyPilot's ``any_of`` (docs.skypilot.co, "YAML Configuration": ``resources.any_of``, the
optimizer picks the cheapest that is available), so a plan chosen for cost rents its card from whichever listed
provider is cheapest at launch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from autotune.errors import InvalidRequestError


@dataclass(frozen=True)
class Offer:
    """One way to rent a card through SkyPilot.

    ``cloud``: SkyPilot's cloud name, or None (any provider: the name is that card wherever it is listed);
    ``instance_types``: GPUs per node -> the provider's instance type, where the name alone is ambiguous (empty: any).
    """

    accelerator: str
    cloud: str | None = None
    instance_types: tuple[tuple[int, str], ...] = ()

    def resources(self, count: int) -> dict[str, Any] | None:
        """This offer as one ``resources`` entry for ``count`` GPUs per node, or None when it has no such node."""
        entry: dict[str, Any] = {}
        if self.cloud is not None:
            entry["cloud"] = self.cloud
        entry["accelerators"] = f"{self.accelerator}:{count}"
        if self.instance_types:
            types = dict(self.instance_types)
            if count not in types:
                return None
            entry["instance_type"] = types[count]
        return entry


_LAMBDA_H100_SXM = tuple((n, f"gpu_{n}x_h100_sxm5") for n in (1, 2, 4, 8))

SKYPILOT_OFFERS: Final[dict[str, tuple[Offer, ...]]] = {
    "a100-40gb": (Offer("A100", "lambda", ((1, "gpu_1x_a100_sxm4"),)),),
    "a100-80gb": (
        Offer("A100-80GB-SXM", "runpod"),
        Offer("A100-80GB", "lambda", ((8, "gpu_8x_a100_80gb_sxm4"),)),
    ),
    "a10g": (Offer("A10G"),),
    "b200": (Offer("B200"),),
    "gh200": (Offer("GH200"),),
    "h100-80gb": (Offer("H100-SXM", "runpod"), Offer("H100", "lambda", _LAMBDA_H100_SXM)),
    "h100-pcie": (Offer("H100", "runpod"), Offer("H100", "lambda", ((1, "gpu_1x_h100_pcie"),))),
    "h200": (Offer("H200-SXM", "runpod"), Offer("H200")),
    "l4": (Offer("L4"),),
    "l40s": (Offer("L40S"),),
    "mi300x": (Offer("MI300X"),),
    "rtx-3090": (Offer("RTX3090"),),
    "rtx-4090": (Offer("RTX4090"),),
    "rtx-6000-ada": (Offer("RTX6000-Ada"),),
    "rtx-a6000": (Offer("A6000", "lambda"), Offer("RTXA6000", "runpod")),
    "rtx-pro-6000": (Offer("RTXPRO6000-WK", "runpod"),),
    "t4": (Offer("T4"),),
    "v100-16gb": (Offer("V100"),),
    "v100-32gb": (Offer("V100-32GB"), Offer("V100-SXM2-32GB", "runpod")),
}
"""Catalog GPU key -> the offers that rent exactly that card. An unpinned name is one no listed provider uses for
another card (``H200`` is RunPod's nothing: its H200 is ``H200-SXM``). Cards SkyPilot has no name for (the
RX 7900 XTX) are refused rather than swapped for another card."""


def skypilot_resources(gpu: str, count: int) -> dict[str, Any]:
    """The task's ``resources`` accelerator part for ``count`` ``gpu`` cards per node.

    One offer: its fields in place (``accelerators``, and ``cloud`` / ``instance_type`` when pinned); several:
    ``any_of`` over them.

    Raises:
        InvalidRequestError: SkyPilot has no name for the card, or no listed provider has a node of ``count`` of it.
    """
    offers = SKYPILOT_OFFERS.get(gpu)
    if offers is None:
        raise InvalidRequestError(
            f"--skypilot: SkyPilot has no accelerator name for {gpu} (sky show-gpus -a); plan for one of "
            f"{', '.join(SKYPILOT_OFFERS)} (autotune plan ... --gpu NAME -o plan.yaml)"
        )
    entries = [entry for entry in (offer.resources(count) for offer in offers) if entry is not None]
    if not entries:
        nodes = sorted({n for offer in offers for n, _ in offer.instance_types})
        raise InvalidRequestError(
            f"--skypilot: no provider in SkyPilot's catalog rents {count}× {gpu} on one node (offered: "
            f"{', '.join(str(n) for n in nodes)} per node); plan with --num-gpus {nodes[-1]}"
        )
    return entries[0] if len(entries) == 1 else {"any_of": entries}
