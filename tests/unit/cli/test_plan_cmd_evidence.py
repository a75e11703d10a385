"""``plan`` / ``estimate`` with ``--interconnect``, and the evidence they print (issue 42)."""

from __future__ import annotations

import json

import pytest
from cli_runner import run


def test_plan_prints_the_network_it_assumed_and_refuses_an_unknown_one(capsys: pytest.CaptureFixture[str]) -> None:
    args = ("plan", "llama3-8b", "--gpu", "h100", "--num-gpus", "8", "--num-nodes", "2", "--method", "lora")
    code, out, err = run(capsys, *args, "--json")
    assert code == 0
    notes = json.loads(out)["notes"]
    assert any("between nodes InfiniBand NDR" in note and "default for this GPU" in note for note in notes)
    code, out, err = run(capsys, *args, "--interconnect", "token-ring")
    assert code == 2 and out == ""
    assert err.strip().count("\n") == 0 and "unknown interconnect 'token-ring'" in err


def test_estimate_takes_the_interconnect_and_ethernet_exposes_the_traffic(capsys: pytest.CaptureFixture[str]) -> None:
    args = ("estimate", "llama3-8b", "--gpu", "h100", "--num-gpus", "8", "--num-nodes", "2", "--method", "full")
    exposed = {}
    for network in ("ib-8x400", "eth-25g"):
        code, out, _ = run(capsys, *args, "--sharding", "fsdp", "--interconnect", network, "--json")
        assert code == 0
        data = json.loads(out)
        exposed[network] = data["time_breakdown_s"]["exposed communication"] / data["step_time_s"]
        assert data["evidence"] in ("core", "public", "extrapolated") and data["evidence_note"]
    assert exposed["eth-25g"] > 0.5 > exposed["ib-8x400"]


def test_the_grid_marks_extrapolated_rows_with_their_wider_band(capsys: pytest.CaptureFixture[str]) -> None:
    args = ("plan", "llama3-8b", "--method", "lora", "--gpu", "mi300x,h100", "--num-samples", "1000")
    code, out, _ = run(capsys, *args, "--json")
    assert code == 0
    rows = {row["gpu"]: row for row in json.loads(out)["rows"]}
    assert rows["mi300x"]["evidence"] == "extrapolated" and rows["h100-80gb"]["evidence"] == "core"
    assert rows["mi300x"]["time_uncertainty_fraction"] > rows["h100-80gb"]["time_uncertainty_fraction"]
    code, out, _ = run(capsys, *args)
    assert code == 0 and "* extrapolated from the datasheet" in out
