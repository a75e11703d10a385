"""``autotune estimate``: adapter dtype, kernels and dropout, and the time terms shown."""

from __future__ import annotations

import json

import pytest
from cli_runner import run

from autotune.costmodel.step_time import TERM_LABELS


def test_estimate_takes_adapter_dtype_kernels_and_dropout_and_shows_the_terms(
    capsys: pytest.CaptureFixture[str],
) -> None:
    base = ("estimate", "llama3-8b", "--gpu", "h100", "--method", "lora", "--micro-batch-size", "4", "--json")
    code, out, _ = run(capsys, *base, "--adapter-dtype", "fp32")
    assert code == 0
    fp32 = json.loads(out)
    code, out, _ = run(capsys, *base, "--adapter-dtype", "compute", "--lora-dropout", "0.1", "--kernels", "liger")
    assert code == 0
    compute = json.loads(out)
    assert (compute["setting"]["adapter_dtype"], compute["setting"]["lora_dropout"]) == ("compute", 0.1)
    assert compute["setting"]["kernels"] == "liger"
    assert any("liger: priced from Liger Kernel's source" in note for note in compute["notes"])
    assert compute["memory_breakdown_gib"]["lora adapters"] < fp32["memory_breakdown_gib"]["lora adapters"]
    assert set(compute["time_breakdown_s"]) == set(TERM_LABELS.values())
    code, out, _ = run(capsys, *base[:-1])
    assert code == 0 and "of the step: lora adapters" in out and "of the step: gemm" in out
    code, _, err = run(capsys, *base, "--adapter-dtype", "bf17")
    assert code == 2 and "--adapter-dtype" in err and "Traceback" not in err
