"""The ``resources`` of ``sky.yaml`` that rent exactly the planned card: its catalog entry's SkyPilot offers.

Which SkyPilot accelerator names rent which card, per provider, is a fact of the card: its catalog entry's
``skypilot_offers`` (:class:`autotune.schemas.hardware.SkyPilotOffer`, with the sources). The launcher imports no
catalog: the CLI passes the plan's GPU entry in (:class:`autotune.launcher.checks.LaunchContext` ``resolve_gpu``).

Several offers become SkyPilot's ``any_of`` (docs.skypilot.co, "YAML Configuration": ``resources.any_of``, the
optimizer picks the cheapest that is available), so a plan chosen for cost rents its card from whichever listed
provider is cheapest at launch.
"""

from __future__ import annotations

from typing import Any

from autotune.errors import InvalidRequestError
from autotune.schemas.hardware import GpuSpec, SkyPilotOffer


def offer_resources(offer: SkyPilotOffer, count: int) -> dict[str, Any] | None:
    """``offer`` as one ``resources`` entry for ``count`` GPUs per node, or None when it has no such node.

    ``accelerators`` is SkyPilot's ``NAME:COUNT``; ``cloud`` and ``instance_type`` are set where the offer pins them.
    """
    entry: dict[str, Any] = {}
    if offer.cloud is not None:
        entry["cloud"] = offer.cloud
    entry["accelerators"] = f"{offer.accelerator}:{count}"
    if offer.instance_types:
        types = dict(offer.instance_types)
        if count not in types:
            return None
        entry["instance_type"] = types[count]
    return entry


def skypilot_resources(gpu_key: str, gpu: GpuSpec | None, count: int) -> dict[str, Any]:
    """The task's ``resources`` accelerator part for ``count`` cards per node of the plan's GPU ``gpu_key``.

    ``gpu`` is its catalog entry (None: not in the catalog). One offer: its fields in place (``accelerators``, and
    ``cloud`` / ``instance_type`` when pinned); several: ``any_of`` over them.

    Raises:
        InvalidRequestError: SkyPilot has no name for the card (or it is not in the catalog), or no listed provider
            has a node of ``count`` of it.
    """
    offers = gpu.skypilot_offers if gpu is not None else ()
    if not offers:
        raise InvalidRequestError(
            f"--skypilot: SkyPilot has no accelerator name for {gpu_key} (sky show-gpus -a); plan for a card it rents "
            "(autotune gpus --json: skypilot_offers) with autotune plan ... --gpu NAME -o plan.yaml"
        )
    entries = [entry for entry in (offer_resources(offer, count) for offer in offers) if entry is not None]
    if not entries:
        nodes = sorted({n for offer in offers for n, _ in offer.instance_types})
        raise InvalidRequestError(
            f"--skypilot: no provider in SkyPilot's catalog rents {count}× {gpu_key} on one node (offered: "
            f"{', '.join(str(n) for n in nodes)} per node); plan with --num-gpus {nodes[-1]}"
        )
    return entries[0] if len(entries) == 1 else {"any_of": entries}
