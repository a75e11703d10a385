"""Print the cold start-up of `autotune --help` and `autotune plan`, next to a bare `python -c pass`, and how
many candidate settings the planner scores per second.

Usage: python benchmarks/plan_latency.py [--runs 15]

Cold latency: a fresh process runs the installed `autotune` console script (imports, catalog loading, search,
rendering) — what a user waits for. Targets (issue 11): `autotune plan llama3-8b --gpu 4090` ≤ 150 ms median,
`autotune --help` ≤ 100 ms median. The bare interpreter's start-up is printed so that the figures can be read
on a machine of any speed. Throughput: in one process, after warm-up, candidates estimated per second.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

STARTUP_CASES: list[tuple[str, list[str]]] = [
    ("autotune --help", ["--help"]),
    ("autotune plan llama3-8b --gpu 4090", ["plan", "llama3-8b", "--gpu", "4090"]),
    ("autotune plan ... --json", ["plan", "llama3-8b", "--gpu", "4090", "--json"]),
]
SEARCH_CASES = [
    ("llama3-8b", "4090", 1, 2048),
    ("llama3-70b", "h100", 8, 4096),
    ("qwen2.5-7b", "a100", 4, 8192),
]


def autotune_script() -> str:
    """The console script installed next to this interpreter (what a user runs), else the one on PATH."""
    beside = Path(sys.executable).with_name("autotune")
    found = str(beside) if beside.is_file() else shutil.which("autotune")
    if found is None:
        raise SystemExit("no autotune console script: pip install -e . first")
    return found


def wall_times_s(argv: list[str], runs: int) -> list[float]:
    """Wall time of ``argv`` in fresh processes (one warm-up run first: file cache, not imports)."""
    subprocess.run(argv, check=True, capture_output=True)
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True)
        times.append(time.perf_counter() - started)
    return times


def candidates_per_s(model: str, gpu: str, gpus: int, seq_len: int) -> tuple[int, float]:
    """(candidates, candidates per second) for one in-process search after a warm-up search."""
    from autotune.cli.planning import request_from_options
    from autotune.planner.search import search

    request, _ = request_from_options(model=model, gpu=gpu, num_gpus=gpus, seq_len=seq_len)
    search(request)
    started = time.perf_counter()
    result = search(request)
    elapsed = time.perf_counter() - started
    return result.searched, result.searched / elapsed


def main() -> None:
    """Print the start-up table and the search throughput."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    script = autotune_script()
    bare = statistics.median(wall_times_s([sys.executable, "-c", "pass"], args.runs))
    print(f"cold start-up, median of {args.runs} runs ({script})")
    print(f"  {'python -c pass':40s} {bare * 1000:7.0f} ms")
    for label, argv in STARTUP_CASES:
        median = statistics.median(wall_times_s([script, *argv], args.runs))
        print(f"  {label:40s} {median * 1000:7.0f} ms   (+{(median - bare) * 1000:.0f} ms over bare python)")
    print(f"\n{'search (in process, warm)':34s} {'candidates':>11s} {'cand/s':>9s}")
    for model, gpu, gpus, seq_len in SEARCH_CASES:
        searched, rate = candidates_per_s(model, gpu, gpus, seq_len)
        print(f"  {f'{model} {gpus}x{gpu} seq {seq_len}':32s} {searched:>11d} {rate:>9.0f}")


if __name__ == "__main__":
    main()
