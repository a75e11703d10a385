"""autotune.profiles.interconnects: the shipped profiles, --interconnect resolution, and what each link prices."""

from __future__ import annotations

import pytest
from plan_requests import plan_request

from autotune.costmodel.collectives import intra_node_bytes_per_s, link_bytes_per_s
from autotune.costmodel.estimate import estimate_setting
from autotune.errors import InvalidRequestError, UnknownNameError
from autotune.profiles.catalog import list_gpus, resolve_gpu
from autotune.profiles.interconnects import default_network, interconnect_catalog, resolve_network
from autotune.schemas.calibration import CostCoefficients
from autotune.units import GB

PROFILES = interconnect_catalog().profiles
INTER = [profile.key for profile in PROFILES if profile.scope == "inter-node"]
INTRA = [profile.key for profile in PROFILES if profile.scope == "intra-node"]
PRIORS = CostCoefficients()


def _two_nodes(interconnect: str | None, nodes: int = 2):  # type: ignore[no-untyped-def]
    request, notes = plan_request(
        model="llama3-70b", gpu="h100", num_gpus=8, num_nodes=nodes, interconnect=interconnect,
        global_batch_size=16 * nodes, method="full", sharding="fsdp", micro_batch_size=2, grad_accum=1,
        grad_ckpt=True, compile=False,
    )  # fmt: skip
    return request, notes


def test_every_default_names_a_catalog_gpu_and_every_profile_cites_a_source() -> None:
    catalog = interconnect_catalog()
    keys = {gpu.key for gpu in list_gpus()}
    assert set(catalog.intra_node_defaults) <= keys
    assert set(catalog.inter_node_defaults) - {"default"} <= keys
    assert all(profile.source.strip() for profile in PROFILES)
    assert len({profile.key for profile in PROFILES}) == len(PROFILES)


@pytest.mark.parametrize("key", INTER)
def test_each_network_sets_the_node_bandwidth_and_prices_collectives_over_it(key: str) -> None:
    request, notes = _two_nodes(key)
    profile = next(p for p in PROFILES if p.key == key)
    cluster = request.cluster
    assert cluster.inter_node_gb_per_s == profile.gb_per_s
    assert any(profile.name in note and "given" in note for note in notes)  # the plan prints the network
    nic = profile.gb_per_s * GB * PRIORS.collective_bandwidth_efficiency
    assert link_bytes_per_s(cluster, PRIORS) == min(nic, intra_node_bytes_per_s(cluster, PRIORS))


@pytest.mark.parametrize("key", INTRA)
def test_each_intra_node_link_sets_the_gpus_bandwidth(key: str) -> None:
    gpu, _ = resolve_gpu("a100-80gb")
    network = resolve_network(gpu, key)
    assert network.intra is not None and network.intra.key == key
    request, _ = plan_request(model="llama3-8b", gpu="a100-80gb", num_gpus=8, interconnect=key, method="full")
    expected = network.intra.gb_per_s * GB
    if not network.intra.measured_bus:
        expected *= PRIORS.collective_bandwidth_efficiency
    assert intra_node_bytes_per_s(request.cluster, PRIORS) == pytest.approx(expected)


def test_geforce_without_p2p_is_priced_at_the_public_nccl_tests_busbw() -> None:
    gpu, _ = resolve_gpu("4090")
    network = default_network(gpu)
    assert network.intra is not None and network.intra.measured_bus
    request, _ = plan_request(model="llama3-8b", gpu="4090", num_gpus=8, method="qlora")
    bus_gb_per_s = link_bytes_per_s(request.cluster, PRIORS) / GB
    assert 10 <= bus_gb_per_s <= 28  # NVIDIA/nccl #1639, #1530; NVIDIA/nccl-tests #270
    assert bus_gb_per_s < gpu.host_link_gb_per_s * PRIORS.collective_bandwidth_efficiency  # below PCIe P2P


def test_two_nodes_on_infiniband_scale_like_public_fsdp_runs_and_ethernet_shows_its_traffic() -> None:
    """docs/cost-model.md §5 'Networks': llm-foundry's MPT-70B on 4-8 nodes keeps 0.88-1.12 of a node's MFU."""
    one, _ = _two_nodes(None, nodes=1)
    ib, _ = _two_nodes("ib-8x400")
    eth, _ = _two_nodes("eth-100g")
    per_gpu = {}
    for name, request in (("one", one), ("ib", ib), ("eth", eth)):
        estimate = estimate_setting(request.model, request.cluster, request.workload, _setting(request), PRIORS)
        per_gpu[name] = (estimate.tokens_per_s / request.cluster.world_size, estimate)
    assert 0.88 <= per_gpu["ib"][0] / per_gpu["one"][0] <= 1.12  # a shard of the optimizer step is smaller
    eth_estimate = per_gpu["eth"][1]
    exposed = eth_estimate.time_breakdown_s["exposed communication"] / eth_estimate.step_time_s
    assert exposed > 0.5
    assert per_gpu["eth"][0] < 0.5 * per_gpu["one"][0]


def _setting(request):  # type: ignore[no-untyped-def]
    from autotune.schemas.setting import TrainingSetting

    forced = request.overrides.forced()
    return TrainingSetting(**forced)


def test_bad_interconnects_are_one_line_errors() -> None:
    gpu, _ = resolve_gpu("h100")
    with pytest.raises(UnknownNameError, match="unknown interconnect 'ib-9x9'; known: nvlink-2"):
        resolve_network(gpu, "ib-9x9")
    with pytest.raises(InvalidRequestError, match="two inter-node profiles"):
        resolve_network(gpu, "ib-8x400,eth-100g")
    both = resolve_network(gpu, "pcie5-p2p, eth-25g")
    assert (both.intra.key if both.intra else None, both.inter.key) == ("pcie5-p2p", "eth-25g")
