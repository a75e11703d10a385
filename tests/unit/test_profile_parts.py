"""benchmarks/profile_parts.py: a profiled step's time by part, from torch.profiler's Chrome trace."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("profile_parts", ROOT / "benchmarks" / "profile_parts.py")
assert _spec is not None and _spec.loader is not None
profile_parts = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(profile_parts)


def _op(name: str, ts: float, dur: float, tid: int = 1, cat: str = "cpu_op") -> dict[str, object]:
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "tid": tid}


def test_nested_operators_count_once_and_gpu_copies_by_direction() -> None:
    events = [
        _op("aten::addmm", 0, 100),
        _op("aten::mm", 10, 80),  # inside the addmm: not counted again
        _op("aten::mm", 200, 50, tid=2),  # the autograd thread
        _op("aten::_scaled_dot_product_flash_attention_for_cpu", 300, 40),
        _op("aten::_log_softmax", 400, 30),
        _op("aten::mul", 500, 500),  # in no part, in the span
        {**_op("Memcpy HtoD (Pinned -> Device)", 600, 60, cat="gpu_memcpy"), "args": {"bytes": 1_200_000}},
        {**_op("Memcpy DtoH (Device -> Pinned)", 700, 20, cat="gpu_memcpy"), "args": {"bytes": 100_000}},
        _op("ampere_sgemm_128x64_nn", 800, 200, cat="kernel"),
    ]
    parts = profile_parts.parts_s(events)
    assert parts["gemm"] == pytest.approx(150e-6)
    assert parts["attention"] == pytest.approx(40e-6)
    assert parts["log-softmax"] == pytest.approx(30e-6)
    assert parts["host→device copies"] == pytest.approx(60e-6)
    assert parts["device→host copies"] == pytest.approx(20e-6)
    assert parts["host→device copies GB/s"] == pytest.approx(20.0)  # 1.2 MB in 60 µs
    assert parts["device→host copies GB/s"] == pytest.approx(5.0)
    assert parts["gpu kernels"] == pytest.approx(200e-6)
    assert parts["span"] == pytest.approx(1000e-6)


def test_a_run_is_read_per_profiled_step_next_to_its_plan_and_a_missing_profile_is_one_line(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "profile").mkdir(parents=True)
    copy = {**_op("Memcpy DtoH (Device -> Pinned)", 0, 1e6, cat="gpu_memcpy"), "args": {"bytes": 8e9}}
    trace = {"traceEvents": [_op("aten::mm", 0, 2e6), _op("aten::mul", 2e6, 2e6), copy]}
    (run / "profile" / "trace-rank0-steps2-3.json").write_text(json.dumps(trace))
    breakdown = {"gemm": 0.5, "lora adapters": 0.25, "attention": 0.1}
    (run / "plan.yaml").write_text(yaml.safe_dump({"prediction": {"time_breakdown_s": breakdown, "step_time_s": 1.2}}))
    measured, predicted = profile_parts.read_run(run)
    assert measured["gemm"] == pytest.approx(1.0)  # 2 s over the two steps 2..3
    assert measured["span"] == pytest.approx(2.0)
    assert measured["device→host copies"] == pytest.approx(0.5)  # per step
    assert measured["device→host copies GB/s"] == pytest.approx(8.0)  # a bandwidth: not per step
    assert predicted["gemm"] == pytest.approx(0.75) and predicted["span"] == pytest.approx(1.2)
    with pytest.raises(profile_parts.NoProfile, match="no profile/trace-rank0-steps"):
        profile_parts.read_run(tmp_path)
    assert profile_parts.main([str(run), str(tmp_path)]) == 2
