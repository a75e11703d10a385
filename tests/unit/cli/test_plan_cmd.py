"""``autotune plan``: forced adapter dtype and kernels."""

from __future__ import annotations

import json

import pytest
from cli_runner import run


def test_plan_overrides_adapter_dtype_and_kernels(capsys: pytest.CaptureFixture[str]) -> None:
    args = ("plan", "llama3-8b", "--gpu", "h100", "--method", "lora", "--json")
    code, out, _ = run(capsys, *args, "--adapter-dtype", "compute", "--kernels", "liger")
    assert code == 0
    plan = json.loads(out)["plan_file"]
    assert (plan["setting"]["adapter_dtype"], plan["setting"]["kernels"]) == ("compute", "liger")
    code, out, _ = run(capsys, *args)
    assert json.loads(out)["plan_file"]["setting"]["kernels"] == "none"  # liger only when forced
