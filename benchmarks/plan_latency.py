"""Print the cold latency of `autotune plan` and how many candidate settings the planner scores per second.

Usage: python benchmarks/plan_latency.py [--runs 5]

Cold latency: a fresh interpreter runs the CLI (imports, catalog loading, search, rendering to JSON) — what
a user waits for. Throughput: in one process, after warm-up, candidates estimated per second.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

CASES = [
    ("llama3-8b", "4090", 1, 2048),
    ("llama3-70b", "h100", 8, 4096),
    ("qwen2.5-7b", "a100", 4, 8192),
]


def cold_latency_s(model: str, gpu: str, gpus: int, seq_len: int, runs: int) -> list[float]:
    """Wall times of `python -m autotune.cli plan ... --json` in fresh interpreters."""
    times = []
    argv = [
        sys.executable,
        "-c",
        "from autotune.cli.app import main; main()",
        "plan",
        model,
        "--gpu",
        gpu,
        "--num-gpus",
        str(gpus),
        "--seq-len",
        str(seq_len),
        "--json",
    ]
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
    """Print one line per case and a summary."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    header = f"cold plan (median of {args.runs})"
    print(f"{'case':34s} {header:>26s} {'candidates':>11s} {'cand/s':>9s}")
    for model, gpu, gpus, seq_len in CASES:
        times = cold_latency_s(model, gpu, gpus, seq_len, args.runs)
        searched, rate = candidates_per_s(model, gpu, gpus, seq_len)
        case = f"{model} {gpus}x{gpu} seq {seq_len}"
        print(f"{case:34s} {statistics.median(times) * 1000:>22.0f} ms {searched:>11d} {rate:>9.0f}")


if __name__ == "__main__":
    main()
