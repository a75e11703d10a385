"""Named interconnects: the links inside a node and the network between nodes (``profiles/interconnects.yaml``).

A profile is data with provenance: one bandwidth per direction, its unit scope (per GPU inside a node, per node
between nodes) and the source that states it. The cost model reads the numbers through
:class:`autotune.schemas.hardware.ClusterSpec` (``intra_node_gb_per_s``, ``inter_node_gb_per_s``); the CLI resolves
``--interconnect`` names into them (``autotune.profiles.interconnects``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from autotune.schemas._base import FrozenModel

Scope = Literal["intra-node", "inter-node"]


class InterconnectProfile(FrozenModel):
    """One named link: NVLink, PCIe (with or without peer-to-peer), or a node's network."""

    key: str = Field(description="Profile name as --interconnect takes it, e.g. 'ib-8x400'.")
    name: str = Field(description="What it is, e.g. 'InfiniBand NDR, 8 × 400 Gb/s per node'.")
    scope: Scope = Field(description="intra-node (between the GPUs of one node) or inter-node (between nodes).")
    gb_per_s: float = Field(
        gt=0,
        description="Bandwidth per direction, decimal GB/s: per GPU inside a node, the node's aggregate NIC "
        "bandwidth between nodes (Gb/s ÷ 8).",
    )
    measured_bus: bool = Field(
        default=False,
        description="gb_per_s is an achieved nccl-tests bus bandwidth (busbw), not a link rate: the collective "
        "bandwidth efficiency is not applied again.",
    )
    source: str = Field(description="Where the bandwidth is stated (datasheet, issue thread).")
    notes: str = Field(default="", description="Ranges, conditions and what the figure leaves out.")


class InterconnectCatalog(FrozenModel):
    """The shipped profiles and the defaults: per GPU inside a node, per GPU (or ``default``) between nodes."""

    profiles: tuple[InterconnectProfile, ...] = Field(description="Every named link.")
    intra_node_defaults: dict[str, str] = Field(
        default_factory=dict,
        description="GPU catalog key → intra-node profile; a GPU not named uses its own link (gpu_link, else PCIe "
        "peer-to-peer over its host link).",
    )
    inter_node_defaults: dict[str, str] = Field(
        description="GPU catalog key → inter-node profile; 'default' for every GPU not named."
    )

    @model_validator(mode="after")
    def _defaults_name_profiles(self) -> InterconnectCatalog:
        """Every default names a profile of the right scope, and 'default' is given between nodes."""
        scopes = {profile.key: profile.scope for profile in self.profiles}
        wanted: tuple[tuple[dict[str, str], Scope], ...] = (
            (self.intra_node_defaults, "intra-node"),
            (self.inter_node_defaults, "inter-node"),
        )
        for defaults, scope in wanted:
            for gpu, key in defaults.items():
                if scopes.get(key) != scope:
                    raise ValueError(f"default for {gpu}: {key!r} is not an {scope} profile")
        if "default" not in self.inter_node_defaults:
            raise ValueError("inter_node_defaults needs a 'default' entry")
        return self
