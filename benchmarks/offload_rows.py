"""The core's CPU-offload runs on one H200 against today's prediction, measured and predicted, per run directory.

Peak allocated memory, micro-step, optimizer step and tokens/s.

The runs are ``src/autotune/profiles/measurements/autotune-core-h200/*-offload`` (their README gives the conditions;
``full-1b-zero3-offload`` ran with the padded-block mask defect fixed since, so its time is shown but not comparable).
The model, setting and workload are the plan's (the plan holds the architecture it read); the cluster is one H200
with the run's host RAM. The micro-step is the run report's;
the optimizer step is the measured step minus grad_accum measured micro-steps.

``host_link_efficiency`` (0.34) was chosen on ``lora-8b-fsdp-offload``'s micro-step, so that row's time is in-sample;
its memory (the FSDP one-GPU held-weights term, derived from torch's source) and the other rows are not.

Usage:  python benchmarks/offload_rows.py      (~3 s)
"""

from __future__ import annotations

import sys
from pathlib import Path

from autotune.costmodel.estimate import estimate_setting
from autotune.profiles.run_reports import load_run_report
from autotune.schemas.plan_io import load_plan
from autotune.session.resolve import resolve_cluster

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "src" / "autotune" / "profiles" / "measurements" / "autotune-core-h200"
NOT_COMPARABLE = {"full-1b-zero3-offload": "time not comparable: ran with the padded-block mask defect"}


def _error(predicted: float, measured: float) -> str:
    return f"{predicted / measured - 1:+.1%}"


def main() -> int:
    """Print one block per offload run directory; returns 0."""
    for run_dir in sorted(path for path in RUNS.iterdir() if path.is_dir() and path.name.endswith("-offload")):
        plan = load_plan(run_dir / "plan.yaml")
        report = load_run_report(run_dir)
        cluster, _ = resolve_cluster(plan.cluster.gpu, 1, 1, plan.cluster.host_memory_gib_per_node)
        estimate = estimate_setting(plan.model, cluster, plan.workload, plan.setting)
        micro_s = report.micro_step_time_s_measured
        step_s = report.step_time_s_measured
        assert micro_s is not None and step_s is not None and report.tokens_per_s_measured is not None
        optimizer_s = step_s - plan.setting.grad_accum * micro_s
        memory_gib = report.peak_memory_gib_measured
        print(f"{run_dir.name} ({plan.setting.method}, {plan.setting.sharding}, mbs {plan.setting.micro_batch_size})")
        if memory_gib is not None:
            print(
                f"  peak allocated  {memory_gib:8.2f} GiB  predicted {estimate.peak_memory_gib:8.2f}  "
                f"{_error(estimate.peak_memory_gib, memory_gib)}"
            )
        rows = (
            ("micro-step", micro_s, estimate.micro_step_time_s, "s"),
            ("optimizer step", optimizer_s, estimate.optimizer_time_s, "s"),
            ("tokens/s", report.tokens_per_s_measured, estimate.tokens_per_s, ""),
        )
        for name, measured, predicted, unit in rows:
            print(f"  {name:15s} {measured:8.3f} {unit:3s} predicted {predicted:8.3f}  {_error(predicted, measured)}")
        if run_dir.name in NOT_COMPARABLE:
            print(f"  ({NOT_COMPARABLE[run_dir.name]})")
        streaming = {k: v for k, v in estimate.time_breakdown_s.items() if k.startswith("pcie")}
        print("  predicted streaming per step: " + ", ".join(f"{k} {v:.3f} s" for k, v in streaming.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
