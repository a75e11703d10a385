"""Print the cold start-up of `autotune --help` and `autotune plan`, next to a bare `python -c pass`, and how
many candidate settings the planner scores per second.

Usage: python benchmarks/plan_latency.py [--runs 15]

Cold latency: a fresh process runs the installed `autotune` console script (imports, catalog loading, search,
rendering) — what a user waits for. Targets (issue 11): `autotune plan llama3-8b --gpu 4090` ≤ 150 ms median,
`autotune --help` ≤ 100 ms median. The bare interpreter's start-up is printed so that the figures can be read
on a machine of any speed, and each figure comes as wall time and as CPU time (user + system of the process:
less sensitive to other load on a shared machine). Python writes and reuses bytecode as it does by default
(``PYTHONDONTWRITEBYTECODE`` is removed from the child's environment; a warm-up run writes it), since an editable
install without cached bytecode compiles every autotune module on every start. Throughput: in one process,
after warm-up, candidates estimated per second.
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


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def start_up_s(argv: list[str], runs: int) -> tuple[float, float]:
    """Median (wall, CPU) seconds of ``argv`` in fresh processes, after one warm-up run (bytecode, file cache)."""
    env = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run(argv, check=True, capture_output=True, env=env)
    walls, cpus = [], []
    for _ in range(runs):
        cpu_before, started = _children_cpu_s(), time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True, env=env)
        walls.append(time.perf_counter() - started)
        cpus.append(_children_cpu_s() - cpu_before)
    return statistics.median(walls), statistics.median(cpus)


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
    bare_wall, bare_cpu = start_up_s([sys.executable, "-c", "pass"], args.runs)
    print(f"cold start-up, median of {args.runs} runs ({script}); load average {os.getloadavg()[0]:.1f}")
    print(f"  {'':40s} {'wall':>8s} {'cpu':>8s}   over bare python (wall / cpu)")
    print(f"  {'python -c pass':40s} {bare_wall * 1000:5.0f} ms {bare_cpu * 1000:5.0f} ms")
    for label, argv in STARTUP_CASES:
        wall, cpu = start_up_s([script, *argv], args.runs)
        over = f"+{(wall - bare_wall) * 1000:.0f} / +{(cpu - bare_cpu) * 1000:.0f} ms"
        print(f"  {label:40s} {wall * 1000:5.0f} ms {cpu * 1000:5.0f} ms   {over}")
    print(f"\n{'search (in process, warm)':34s} {'candidates':>11s} {'cand/s':>9s}")
    for model, gpu, gpus, seq_len in SEARCH_CASES:
        searched, rate = candidates_per_s(model, gpu, gpus, seq_len)
        print(f"  {f'{model} {gpus}x{gpu} seq {seq_len}':32s} {searched:>11d} {rate:>9.0f}")


if __name__ == "__main__":
    main()
