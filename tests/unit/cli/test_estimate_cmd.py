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


def test_zero3_on_one_gpu_is_estimated_with_its_hooks_and_no_communication(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue 28: DeepSpeed runs ZeRO-3 in one process (what ZeRO-Infinity builds on), so ``estimate`` prices it.

    On one rank ZeRO-3 partitions nothing: memory is ``none``'s, its collectives move nothing, and its module hooks
    (``zero3_module_fetch_s`` per module and pass) are what it adds to the step.
    """
    base = ("estimate", "llama3-8b", "--gpu", "h100", "--method", "lora", "--micro-batch-size", "2", "--json")
    estimates = {}
    for sharding in ("none", "zero3"):
        code, out, err = run(capsys, *base, "--sharding", sharding)
        assert code == 0, err
        estimates[sharding] = json.loads(out)
    none, zero3 = estimates["none"], estimates["zero3"]
    assert zero3["setting"]["sharding"] == "zero3"
    assert zero3["peak_memory_gib"] == pytest.approx(none["peak_memory_gib"], rel=0.01)
    terms = zero3["time_breakdown_s"]
    assert terms["exposed communication"] == 0.0
    assert terms["zero-3 module hooks"] > 0.0 == none["time_breakdown_s"]["zero-3 module hooks"]
    assert zero3["step_time_s"] == pytest.approx(none["step_time_s"] + terms["zero-3 module hooks"], rel=0.01)


@pytest.mark.parametrize("sharding", ["ddp", "fsdp"])
def test_ddp_and_fsdp_on_one_gpu_stay_refused(capsys: pytest.CaptureFixture[str], sharding: str) -> None:
    code, out, err = run(capsys, "estimate", "llama3-8b", "--gpu", "h100", "--sharding", sharding)
    assert code == 2 and not out
    assert err.strip().splitlines() == [
        f"error: --sharding {sharding} needs more than one GPU (use --num-gpus); on one GPU use none, fsdp-offload, "
        "zero2, zero3 or zero3-offload"
    ]
