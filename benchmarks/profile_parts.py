"""Where a profiled step's time went, by part, next to the plan's predicted parts (``launch --profile-steps``).

Usage:
  python benchmarks/profile_parts.py RUN_DIR [RUN_DIR ...]

Each RUN_DIR is a run of ``autotune launch ... --profile-steps N``: it holds ``plan.yaml`` (the prediction) and
``profile/trace-rank0-steps*.json`` (torch.profiler's Chrome trace of rank 0). The trace's events are summed by part:

- on the CPU (every run): the wall time of the operators that make each part, each counted once: ``gemm`` (``aten::mm``,
  ``addmm``, ``bmm``, ``baddbmm``: base and LoRA GEMMs, lm_head included), ``attention`` (the scaled-dot-product
  and flash-attention ops, forward and backward), ``log-softmax`` (the loss's log-softmax, forward and backward),
  ``optimizer`` (the ``Optimizer.step`` annotation), and the span of the whole trace; on a CPU run an operator's time
  is its compute (the trace holds the main thread, whose ops run the intra-op threads);
- on a GPU (where the trace has device events): the kernels' time in all, the host→device and device→host copies
  (``gpu_memcpy`` events, "Memcpy HtoD (Pinned -> Device)" and the like: CPU offload's weight and gradient
  streaming) with the bandwidth they reached (their ``bytes`` over their time: whether the link or the overlap is
  what costs), and the span.

The plan's parts (``prediction.time_breakdown_s``, one optimizer step) are printed beside the measured ones in seconds
per profiled step; with two runs, also each part's ratio run 1 / run 2, measured and predicted (the packed / padded
comparison of issue 26: ``benchmarks/packing_ratio.py``'s plans launched with ``--profile-steps``).
It exits 0 whatever the figures, 2 when a run directory has no profile or no plan.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

CPU_PARTS: dict[str, tuple[str, ...]] = {
    "gemm": ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"),
    "attention": ("scaled_dot_product", "flash_attn", "_efficient_attention", "_flash_attention"),
    "log-softmax": ("aten::_log_softmax", "aten::_log_softmax_backward_data"),
    "optimizer": ("Optimizer.step",),
}
"""Part → the CPU operator / annotation names (exact for ``aten::`` names, substrings otherwise) that make it."""

PREDICTED_PARTS: dict[str, tuple[str, ...]] = {
    "gemm": ("gemm", "lora adapters"),
    "attention": ("attention",),
    "log-softmax": ("lm_head + loss",),
    "optimizer": ("optimizer step",),
    "host→device copies": ("pcie weight streaming",),
    "device→host copies": ("pcie gradient streaming",),
}
"""Measured part → the plan's ``time_breakdown_s`` entries it compares with (the lm_head GEMM is in ``gemm`` measured
and in ``lm_head + loss`` predicted: the log-softmax line compares only roughly)."""


def _matches(name: str, patterns: tuple[str, ...]) -> bool:
    return any(name == p if p.startswith("aten::") else p in name for p in patterns)


def _outermost(events: list[dict[str, Any]]) -> float:
    """Summed duration of events on one thread, a nested one (e.g. ``aten::mm`` under ``aten::addmm``) counted once."""
    total, end = 0.0, float("-inf")
    for event in sorted(events, key=lambda e: (e["ts"], -e["dur"])):
        start, stop = event["ts"], event["ts"] + event["dur"]
        if start >= end:
            total += event["dur"]
            end = stop
        elif stop > end:
            total += stop - end
            end = stop
    return total


def parts_s(events: Iterable[dict[str, Any]]) -> dict[str, float]:
    """Seconds per part of one trace's events (module docstring); Chrome-trace times are microseconds."""
    complete = [e for e in events if e.get("ph") == "X" and "dur" in e and "ts" in e]
    if not complete:
        return {}
    found: dict[str, float] = {}
    host = [e for e in complete if e.get("cat") in ("cpu_op", "user_annotation")]
    for part, patterns in CPU_PARTS.items():
        chosen = [e for e in host if _matches(e["name"], patterns)]
        by_thread: dict[Any, list[dict[str, Any]]] = {}
        for event in chosen:
            by_thread.setdefault(event.get("tid"), []).append(event)
        found[part] = sum(_outermost(thread) for thread in by_thread.values()) / 1e6
    kernels = [e for e in complete if e.get("cat") == "kernel"]
    copies = [e for e in complete if e.get("cat") == "gpu_memcpy"]
    if kernels or copies:
        found["gpu kernels"] = sum(e["dur"] for e in kernels) / 1e6
        for part, direction in (("host→device copies", "HtoD"), ("device→host copies", "DtoH")):
            moved = [e for e in copies if direction in e["name"]]
            found[part] = sum(e["dur"] for e in moved) / 1e6
            if found[part] > 0:
                found[f"{part} GB/s"] = sum(e.get("args", {}).get("bytes", 0) for e in moved) / 1e9 / found[part]
    start = min(e["ts"] for e in complete)
    found["span"] = (max(e["ts"] + e["dur"] for e in complete) - start) / 1e6
    return found


def profiled_steps(trace: Path) -> int:
    """How many optimizer steps a trace named ``trace-rankR-stepsA-B.json`` holds (B − A + 1)."""
    first, last = trace.stem.rsplit("-steps", 1)[1].split("-")
    return int(last) - int(first) + 1


def predicted_parts_s(plan: dict[str, Any]) -> dict[str, float]:
    """The plan's predicted seconds per optimizer step by measured part (:data:`PREDICTED_PARTS`); step time as span."""
    prediction = plan.get("prediction") or {}
    breakdown = prediction.get("time_breakdown_s") or {}
    parts = {part: sum(float(breakdown.get(n, 0.0)) for n in names) for part, names in PREDICTED_PARTS.items()}
    parts["span"] = float(prediction.get("step_time_s") or 0.0)
    return parts


class NoProfile(Exception):
    """A run directory without a profile or a plan (the message says which directory)."""


def read_run(run: Path) -> tuple[dict[str, float], dict[str, float]]:
    """(measured seconds per profiled step by part, predicted seconds per step by part) of a profiled run.

    The copies' bandwidths (``... GB/s``) are over all the profiled steps, not divided.

    Raises:
        NoProfile: no ``profile/trace-rank0-steps*.json`` or no ``plan.yaml`` in ``run``.
    """
    traces = sorted((run / "profile").glob("trace-rank0-steps*.json"))
    if not traces or not (run / "plan.yaml").is_file():
        raise NoProfile(f"{run}: no profile/trace-rank0-steps*.json or plan.yaml (launch with --profile-steps)")
    trace = traces[-1]
    steps = profiled_steps(trace)
    parts = parts_s(json.loads(trace.read_text())["traceEvents"])
    measured = {k: v if k.endswith("GB/s") else v / steps for k, v in parts.items()}
    return measured, predicted_parts_s(yaml.safe_load((run / "plan.yaml").read_text()))


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.3f}" if a and b else "-"


def main(argv: list[str] | None = None) -> int:
    """Print each run's parts, measured and predicted, and with two runs the ratios; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run directories launched with --profile-steps")
    args = parser.parse_args(argv)
    try:
        read = [read_run(run) for run in args.runs]
    except NoProfile as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    gpu_parts = ("gpu kernels", "host→device copies", "host→device copies GB/s", "device→host copies",
                 "device→host copies GB/s")  # fmt: skip
    names = [n for n in (*CPU_PARTS, *gpu_parts, "span") if any(n in measured for measured, _ in read)]
    header = "".join(f" | {run.name[:18]:>18s} meas / pred s" for run in args.runs)
    print(f"{'part (s per step)':22s}{header}" + (" | ratio 1/2 meas / pred" if len(read) == 2 else ""))
    for name in names:
        cells = "".join(
            f" | {measured.get(name, 0.0):14.3f} / {predicted.get(name, float('nan')):11.4f}"
            for measured, predicted in read
        )
        ratios = ""
        if len(read) == 2:
            (m1, p1), (m2, p2) = read
            ratios = f" | {_ratio(m1.get(name), m2.get(name)):>7s} / {_ratio(p1.get(name), p2.get(name)):>7s}"
        print(f"{name:22s}{cells}{ratios}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
