"""GPU description used by the cost model (one YAML per GPU in ``profiles/gpus``).

Units live in the field names. Throughputs are vendor *dense* peaks (no 2:4 sparsity), tensor-core
rates for bf16/fp16/tf32 and the non-tensor rate for fp32; they are upper bounds that the cost model
scales by fitted efficiencies. Sources are per file (``source``) and per value where they disagree
(``notes``).
"""

from __future__ import annotations

import functools
from typing import Literal

from pydantic import Field

from autotune.schemas._base import FrozenModel


class SkyPilotOffer(FrozenModel):
    """One way to rent a card through SkyPilot: its accelerator name, pinned where the name alone is another card.

    One SkyPilot name can be two cards: RunPod's ``H100`` and ``A100-80GB`` are the PCIe cards (its SXM ones are
    ``H100-SXM`` and ``A100-80GB-SXM``, its H200 ``H200-SXM``), and Lambda names its PCIe and SXM H100 both ``H100``
    (only the instance type, ``gpu_1x_h100_pcie`` vs ``gpu_N x_h100_sxm5``, tells them apart). An SXM plan run on a
    PCIe card is slower than planned, so a name that is ambiguous somewhere is offered only where SkyPilot's catalog
    shows it to be that card: pinned to the provider (``cloud``), and on Lambda to the instance type. A name that is
    the same card everywhere SkyPilot lists it leaves the provider open.

    Sources (transcribed with their commits in ``tests/fixtures/skypilot/catalog.yaml``, which the tests check every
    catalog GPU's offers against): skypilot-org/skypilot ``sky/catalog/data_fetchers/fetch_runpod.py`` (RunPod's
    names and overrides) and ``fetch_lambda_cloud.py``; skypilot-org/skypilot-catalog ``catalogs/v7/lambda/vms.csv``
    and ``runpod/vms.csv``.
    """

    accelerator: str = Field(
        min_length=1, description="SkyPilot's accelerator name, e.g. 'H100-SXM' (sky show-gpus -a)."
    )
    cloud: str | None = Field(
        default=None,
        min_length=1,
        description="SkyPilot's cloud name the offer is pinned to, e.g. 'runpod'; None: any provider (the name is "
        "this card wherever SkyPilot lists it).",
    )
    instance_types: tuple[tuple[int, str], ...] = Field(
        default=(),
        description="(GPUs per node, the provider's instance type) pairs, where the name alone is ambiguous (empty: "
        "any node size under the name); a node size not listed is not rented. A list of pairs, not a mapping: the "
        "catalog's JSON cache keeps only data JSON holds exactly (no integer keys).",
    )


class GpuSpec(FrozenModel):
    """One accelerator model, as sold (one card / one module)."""

    key: str = Field(description="Catalog key, also the YAML file name, e.g. 'rtx-4090'.")
    name: str = Field(description="Marketing name, e.g. 'NVIDIA GeForce RTX 4090'.")
    vendor: Literal["nvidia", "amd"]
    architecture: str = Field(description="Architecture / chip, e.g. 'Ada Lovelace (AD102)'.")
    aliases: tuple[str, ...] = Field(default=(), description="Other names users type ('4090').")
    memory_gib: float = Field(
        gt=0,
        description="Device memory in GiB that the framework can address (what torch reports as total).",
    )
    memory_bandwidth_gb_per_s: float = Field(gt=0, description="Peak DRAM bandwidth, decimal GB/s.")
    bf16_tflops: float | None = Field(
        default=None, gt=0, description="Dense bf16 tensor TFLOP/s (fp32 accumulate); None if unsupported."
    )
    fp16_tflops: float = Field(gt=0, description="Dense fp16 tensor TFLOP/s with fp32 accumulate.")
    tf32_tflops: float | None = Field(default=None, gt=0, description="Dense tf32 tensor TFLOP/s, if any.")
    fp32_tflops: float = Field(gt=0, description="Non-tensor fp32 TFLOP/s.")
    supports_bf16: bool
    supports_bitsandbytes: bool = Field(
        description="bitsandbytes 4-bit / 8-bit CUDA kernels available (not on ROCm consumer cards)."
    )
    supports_flash_attention: bool = Field(
        default=True,
        description="SDPA runs a flash / memory-efficient kernel (no s^2 score matrix in memory).",
    )
    sm_count: int | None = Field(
        default=None,
        gt=0,
        description="Streaming multiprocessors (NVIDIA) or compute units (AMD): GEMM wave quantization.",
    )
    host_link: str = Field(description="Host interface, e.g. 'PCIe 4.0 x16'.")
    host_link_gb_per_s: float = Field(gt=0, description="Host link bandwidth per direction, GB/s.")
    gpu_link: str | None = Field(default=None, description="GPU-GPU link, e.g. 'NVLink 4'; None = PCIe.")
    gpu_link_gb_per_s: float | None = Field(
        default=None, gt=0, description="GPU-GPU bandwidth per direction per GPU, GB/s (None = host link)."
    )
    tdp_w: float | None = Field(default=None, gt=0)
    current: bool = Field(
        default=False,
        description="One of the current datacenter / workstation cards that `autotune plan --gpu any` plans: of an "
        "architecture its vendor still sells as its latest or previous datacenter / workstation line (NVIDIA Hopper, "
        "Ada Lovelace and Blackwell, AMD CDNA 3); consumer cards (GeForce, Radeon) and older generations are named to "
        "be planned.",
    )
    skypilot_offers: tuple[SkyPilotOffer, ...] = Field(
        default=(),
        description="The ways to rent exactly this card through SkyPilot (`launch --skypilot`: one is the task's "
        "accelerators, several its any_of); empty: SkyPilot has no name for it, and --skypilot refuses it.",
    )
    source: str = Field(description="Where the values come from (URLs, repo:path@commit).")
    notes: str = Field(default="", description="Disagreements, preferences and unconfirmed values.")
    unconfirmed: tuple[str, ...] = Field(default=(), description="Field names whose value no primary source confirms.")

    @property
    def generation(self) -> str:
        """The architecture generation: the first word of ``architecture``, lower case (parsed once per text).

        One of 'ampere', 'hopper', 'ada', 'blackwell', 'volta', 'turing', 'cdna', 'rdna' for the shipped profiles
        ('Hopper, SXM5' → 'hopper', 'Ada Lovelace (AD102)' → 'ada'); the key of the per-generation coefficients
        (``CostCoefficients.matmul_efficiency``) and of generation-specific facts (Hopper's cuBLAS workspace).
        """
        return _generation(self.architecture)

    def matmul_tflops(self, compute_dtype: str) -> float:
        """Peak dense matmul TFLOP/s for a compute dtype ('bf16', 'fp16', 'fp32').

        fp32 training matmuls run at the tf32 tensor rate where the GPU has one (PyTorch
        allows tf32 for matmuls by default in HF Trainer with ``tf32=True``; we assume it),
        else at the non-tensor fp32 rate. bf16 on a GPU without bf16 falls back to fp16.
        """
        if compute_dtype == "bf16":
            return self.bf16_tflops if self.bf16_tflops is not None else self.fp16_tflops
        if compute_dtype == "fp16":
            return self.fp16_tflops
        return self.tf32_tflops if self.tf32_tflops is not None else self.fp32_tflops


@functools.lru_cache(maxsize=64)
def _generation(architecture: str) -> str:
    return architecture.split()[0].strip(",").lower()


class ClusterSpec(FrozenModel):
    """The hardware a run uses: ``num_nodes`` nodes of ``num_gpus_per_node`` identical GPUs."""

    gpu: GpuSpec
    num_gpus_per_node: int = Field(default=1, ge=1, le=64)
    num_nodes: int = Field(default=1, ge=1, le=4096)
    host_memory_gib_per_node: float | None = Field(
        default=None, gt=0, description="Host RAM per node available to CPU offload; None = unknown."
    )
    inter_node_gb_per_s: float = Field(
        default=25.0,
        gt=0,
        description="Network bandwidth per node per direction, GB/s: the node's aggregate NIC bandwidth (the CLI sets "
        "it from the interconnect profile, profiles/interconnects.yaml; 25 = one 200 Gb/s NIC when none is given).",
    )
    intra_node_gb_per_s: float | None = Field(
        default=None,
        gt=0,
        description="GPU-GPU bandwidth inside a node per direction per GPU, GB/s; None = the GPU's own link "
        "(gpu_link_gb_per_s, else host_link_gb_per_s).",
    )
    intra_node_bus_measured: bool = Field(
        default=False,
        description="intra_node_gb_per_s is an achieved nccl-tests bus bandwidth (no collective efficiency applied).",
    )
    network: str = Field(default="", description="The interconnect profiles assumed, in words (printed by plans).")

    @property
    def world_size(self) -> int:
        """Total GPUs (= data-parallel ranks; autotune does no tensor or pipeline parallelism)."""
        return self.num_gpus_per_node * self.num_nodes
