"""The shipped interconnect profiles (``profiles/interconnects.yaml``) and ``--interconnect`` resolution.

A cluster's network is two links: between the GPUs of a node (NVLink, PCIe with peer-to-peer, PCIe without it through
host memory) and between nodes (InfiniBand / RoCE, EFA, Ethernet). ``--interconnect`` names one or both (comma
separated, each classified by its profile's scope); what it leaves out comes from the defaults: inside a node the
GPU's own link (``GpuSpec.gpu_link``, else PCIe peer-to-peer over its host link) unless the file names a profile for
the GPU (GeForce cards: no P2P), between nodes the GPU's platform default (``inter_node_defaults``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from autotune.errors import InvalidRequestError, UnknownNameError
from autotune.profiles.shipped_yaml import load_shipped
from autotune.schemas.hardware import GpuSpec
from autotune.schemas.interconnect import InterconnectCatalog, InterconnectProfile

SHIPPED_FILE = "interconnects.yaml"


@functools.cache
def interconnect_catalog() -> InterconnectCatalog:
    """The shipped catalog (cached per process; ``ValueError`` if malformed: a packaging bug)."""
    return load_shipped(SHIPPED_FILE, InterconnectCatalog, "interconnects")


def interconnect(key: str) -> InterconnectProfile:
    """The profile named ``key`` (case and surrounding spaces ignored).

    Raises:
        UnknownNameError: no profile has that name (the message lists them all).
    """
    profiles = {profile.key: profile for profile in interconnect_catalog().profiles}
    found = profiles.get(key.strip().lower())
    if found is None:
        raise UnknownNameError(f"unknown interconnect '{key}'; known: {', '.join(profiles)}")
    return found


@dataclass(frozen=True)
class Network:
    """The links a cluster is priced with.

    Attributes:
        intra: the intra-node profile, or None for the GPU's own link (``GpuSpec.gpu_link`` / host link).
        inter: the inter-node profile (used only with more than one node).
        given: the names the user gave (empty: every link is a default).
    """

    intra: InterconnectProfile | None
    inter: InterconnectProfile
    given: tuple[str, ...] = ()

    def describe(self, gpu: GpuSpec, num_nodes: int) -> str:
        """One line: 'network: inside a node NVLink 4 …; between nodes InfiniBand NDR … (default)'."""
        if self.intra is not None:
            inside = f"{self.intra.name} ({self.intra.key}"
        elif gpu.gpu_link is not None:
            inside = f"{gpu.gpu_link}, {gpu.gpu_link_gb_per_s:g} GB/s per direction (the GPU's own link"
        else:
            inside = f"{gpu.host_link} peer-to-peer, {gpu.host_link_gb_per_s:g} GB/s (the GPU's own link"
        inside += ", given)" if self.intra is not None and self.intra.key in self.given else ", default)"
        text = f"network: inside a node {inside}"
        if num_nodes > 1:
            origin = "given" if self.inter.key in self.given else "default for this GPU; --interconnect to change"
            text += (
                f"; between nodes {self.inter.name}, {self.inter.gb_per_s:g} GB/s per node ({self.inter.key}, {origin})"
            )
        return text


def default_network(gpu: GpuSpec) -> Network:
    """The defaults for ``gpu``: its intra-node profile if the file names one, and its inter-node default."""
    catalog = interconnect_catalog()
    intra_key = catalog.intra_node_defaults.get(gpu.key)
    inter_key = catalog.inter_node_defaults.get(gpu.key, catalog.inter_node_defaults["default"])
    return Network(intra=interconnect(intra_key) if intra_key else None, inter=interconnect(inter_key))


def resolve_network(gpu: GpuSpec, names: str | None) -> Network:
    """``--interconnect`` ('ib-8x400', 'pcie4-p2p,eth-100g') over ``gpu``'s defaults.

    Raises:
        UnknownNameError: a name that is no profile.
        InvalidRequestError: two profiles of the same scope.
    """
    network = default_network(gpu)
    if not names:
        return network
    given = tuple(part.strip() for part in names.split(",") if part.strip())
    intra, inter, seen = network.intra, network.inter, set[str]()
    for name in given:
        profile = interconnect(name)
        if profile.scope in seen:
            raise InvalidRequestError(f"--interconnect names two {profile.scope} profiles; give one of each at most")
        seen.add(profile.scope)
        if profile.scope == "intra-node":
            intra = profile
        else:
            inter = profile
    return Network(intra=intra, inter=inter, given=tuple(interconnect(name).key for name in given))
