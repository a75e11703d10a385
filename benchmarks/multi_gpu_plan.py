"""Print how long planning every GPU type × count row of issue 27's question takes, against its 3 s target.

The question: ``autotune plan llama3-8b --gpu 4090,a100-80gb,h100 --num-gpus 1,2,8 --num-samples 50000 --epochs 2
--objective cost --deadline 24h`` (9 rows). Two figures, each the median of ``--runs`` runs:

* in-process: validating the options, planning all 9 cells and choosing (:func:`autotune.grid`, the Python API),
  after one warm-up run — the planner's share;
* cold: a fresh process runs the installed ``autotune`` console script with that command line (imports, catalog,
  the 9 plans, the table) — what a user waits for.

Each comes as wall and CPU time (user + system: less sensitive to other load on a shared machine); the load average
is printed before and after.

Usage: python benchmarks/multi_gpu_plan.py [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time

ARGS = [
    "plan",
    "llama3-8b",
    "--gpu",
    "4090,a100-80gb,h100",
    "--num-gpus",
    "1,2,8",
    "--num-samples",
    "50000",
    "--epochs",
    "2",
    "--objective",
    "cost",
    "--deadline",
    "24h",
]
TARGET_S = 3.0


def in_process(runs: int) -> tuple[list[float], list[float], int]:
    """Wall and CPU seconds of :func:`autotune.grid` for :data:`ARGS`, and the number of rows."""
    from autotune import grid

    def once() -> int:
        outcome = grid(
            "llama3-8b",
            gpu=["4090", "a100-80gb", "h100"],
            num_gpus=[1, 2, 8],
            num_samples=50000,
            epochs=2.0,
            objective="cost",
            deadline="24h",
        )
        return len(outcome.report.rows)

    rows = once()  # warm-up: catalog, calibration, pydantic schemas
    walls, cpus = [], []
    for _ in range(runs):
        wall, cpu = time.perf_counter(), time.process_time()
        once()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return walls, cpus, rows


def cold(runs: int) -> tuple[list[float], list[float]]:
    """Wall and CPU seconds of a fresh ``autotune`` process running :data:`ARGS` (one warm-up run first)."""
    exe = shutil.which("autotune")
    command = [exe, *ARGS] if exe else [sys.executable, "-m", "autotune.cli.app", *ARGS]
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run(command, check=True, capture_output=True, env=env)
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True, env=env)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return walls, cpus


def main() -> None:
    """Run both measurements and print one line each with the target."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    print(f"autotune {' '.join(ARGS)}")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    walls, cpus, rows = in_process(args.runs)
    for label, (w, c) in (("in-process, all rows", (walls, cpus)), ("cold CLI", cold(args.runs))):
        wall, cpu = statistics.median(w), statistics.median(c)
        verdict = "meets" if wall <= TARGET_S else "MISSES"
        print(
            f"{label:<22} {rows} rows: median wall {wall:.2f} s, CPU {cpu:.2f} s over {args.runs} runs "
            f"(target {TARGET_S:.0f} s: {verdict})"
        )
    print(f"load average after:  {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
