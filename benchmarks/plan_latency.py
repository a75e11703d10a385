"""Print the cold start-up of `autotune --help` and `autotune plan` against their targets.

Shown next to a bare `python -c pass` and to the import floor of the libraries they stand on, with how many candidate
settings the planner scores per second.

Usage: python benchmarks/plan_latency.py [--runs 15]

Issue 25's bar for the same command: the library floor with PyYAML (the required libraries) + 150 ms, printed for
wall and CPU time.

Cold latency: a fresh process runs the installed `autotune` console script (imports, catalog loading, search,
rendering) — what a user waits for. Targets (issue 11): `autotune plan llama3-8b --gpu 4090` ≤ 150 ms median,
`autotune --help` ≤ 100 ms median. Two references are printed so that the figures can be read on a machine of
any speed: the bare interpreter, and the library floor (a process that only imports typer with its pydantic
adapters, builds one pydantic model and draws one rich table to a buffer: what any ``plan`` on this stack pays
before autotune's own work). Each figure comes as wall time and as CPU time (user + system of
the process: less sensitive to other load on a shared machine); the load average is printed before and after.

Python writes and reuses bytecode as it does by default (``PYTHONDONTWRITEBYTECODE`` is removed from the child's
environment; a warm-up run writes it), since an editable install without cached bytecode compiles every autotune
module on every start. The warm-up run also writes the parsed-catalog cache (``autotune.profiles.shipped_cache``)
as a user's first run does; the row "catalog cache off" points ``AUTOTUNE_CACHE_DIR`` at a path that cannot be
created, so every run parses the YAML. Throughput: in one process, after warm-up, candidates estimated per second.
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

PLAN_ARGS = ["plan", "llama3-8b", "--gpu", "4090"]
NO_CACHE_ENV = {"AUTOTUNE_CACHE_DIR": os.devnull + "/autotune-cache"}
"""A cache directory that cannot be created (a path under a device file): the catalog is parsed every run."""

STARTUP_CASES: list[tuple[str, list[str], dict[str, str], float | None]] = [
    ("autotune --help", ["--help"], {}, 100.0),
    ("autotune plan llama3-8b --gpu 4090", PLAN_ARGS, {}, 150.0),
    ("autotune plan ... --json", [*PLAN_ARGS, "--json"], {}, None),
    ("autotune plan ... (catalog cache off)", PLAN_ARGS, NO_CACHE_ENV, None),
]
"""(label, arguments of the console script, extra environment, target median wall ms or None)."""

LIBRARY_FLOOR = (
    "import io, typer, typer._adapters, pydantic\n"
    "from rich.console import Console\n"
    "from rich.table import Table\n"
    "class M(pydantic.BaseModel):\n    x: int = 0\n"
    "M(x=1)\n"
    "table = Table('a')\ntable.add_row('1')\nConsole(file=io.StringIO()).print(table)\n"
)
"""The libraries' share of a cold ``plan``: typer (and the pydantic adapters it builds options with), one
pydantic model built and validated (pydantic's first schema build loads most of its machinery), one rich table
drawn. (PyYAML is not in it: a warm ``plan`` reads the catalog from its JSON cache and never imports it.)"""

LIBRARY_FLOOR_WITH_YAML = "import yaml\n" + LIBRARY_FLOOR
"""Issue 25's floor: the required libraries (pydantic, typer, rich, PyYAML) imported, as above."""

OVER_FLOOR_TARGET_MS = 150.0
"""Issue 25's bar: a cold ``autotune plan llama3-8b --gpu 4090`` within the library floor (with PyYAML) + 150 ms."""

FLOOR_ENV = {"PYDANTIC_DISABLE_PLUGINS": "__all__"}
"""As ``autotune`` runs pydantic (``autotune.cli.app.PYDANTIC_PLUGINS_ENV``): no plugin discovery."""

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


def start_up_s(argv: list[str], runs: int, extra_env: dict[str, str] | None = None) -> tuple[float, float]:
    """Median (wall, CPU) seconds of ``argv`` in fresh processes.

    Measured after one warm-up run (bytecode, file cache, catalog cache).
    """
    env = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
    env.update(extra_env or {})
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
    from autotune.planner.search import search
    from autotune.session.planning import PlanOptions, request_from_options

    request, _ = request_from_options(PlanOptions(model=model, gpu=gpu, num_gpus=gpus, seq_len=seq_len))
    search(request)
    started = time.perf_counter()
    result = search(request)
    elapsed = time.perf_counter() - started
    return result.searched, result.searched / elapsed


def main() -> None:
    """Print the start-up table (with the targets) and the search throughput."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    script = autotune_script()
    load_before = os.getloadavg()[0]
    bare_wall, bare_cpu = start_up_s([sys.executable, "-c", "pass"], args.runs)
    floor_wall, floor_cpu = start_up_s([sys.executable, "-c", LIBRARY_FLOOR], args.runs, FLOOR_ENV)
    print(f"cold start-up, median of {args.runs} runs ({script})")
    print(f"  {'':44s} {'wall':>8s} {'cpu':>8s}   {'over bare python':>18s}   target (wall)")
    print(f"  {'python -c pass':44s} {bare_wall * 1000:5.0f} ms {bare_cpu * 1000:5.0f} ms")
    over = f"+{(floor_wall - bare_wall) * 1000:.0f} / +{(floor_cpu - bare_cpu) * 1000:.0f} ms"
    label = "library floor (typer, pydantic, rich)"
    print(f"  {label:44s} {floor_wall * 1000:5.0f} ms {floor_cpu * 1000:5.0f} ms   {over:>18s}")
    yaml_wall, yaml_cpu = start_up_s([sys.executable, "-c", LIBRARY_FLOOR_WITH_YAML], args.runs, FLOOR_ENV)
    over = f"+{(yaml_wall - bare_wall) * 1000:.0f} / +{(yaml_cpu - bare_cpu) * 1000:.0f} ms"
    label = "library floor + PyYAML (issue 25's floor)"
    print(f"  {label:44s} {yaml_wall * 1000:5.0f} ms {yaml_cpu * 1000:5.0f} ms   {over:>18s}")
    plan_wall = plan_cpu = 0.0
    for label, argv, extra_env, target_ms in STARTUP_CASES:
        wall, cpu = start_up_s([script, *argv], args.runs, extra_env)
        if argv == PLAN_ARGS and not extra_env:
            plan_wall, plan_cpu = wall, cpu
        over = f"+{(wall - bare_wall) * 1000:.0f} / +{(cpu - bare_cpu) * 1000:.0f} ms"
        verdict = ""
        if target_ms is not None:
            verdict = f"≤ {target_ms:.0f} ms: {'met' if wall * 1000 <= target_ms else 'NOT met'}"
        print(f"  {label:44s} {wall * 1000:5.0f} ms {cpu * 1000:5.0f} ms   {over:>18s}   {verdict}".rstrip())
    for kind, plan_s, floor_s in (("wall", plan_wall, yaml_wall), ("cpu", plan_cpu, yaml_cpu)):
        over_ms = (plan_s - floor_s) * 1000
        verdict = "met" if over_ms <= OVER_FLOOR_TARGET_MS else "NOT met"
        print(
            f"  plan over issue 25's floor ({kind}): {plan_s * 1000:.0f} - {floor_s * 1000:.0f} = {over_ms:+.0f} ms "
            f"(≤ +{OVER_FLOOR_TARGET_MS:.0f} ms: {verdict})"
        )
    print(
        f"  load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after (2 cores shared: see the cpu column)"
    )
    print(f"\n{'search (in process, warm)':34s} {'candidates':>11s} {'cand/s':>9s}")
    for model, gpu, gpus, seq_len in SEARCH_CASES:
        searched, rate = candidates_per_s(model, gpu, gpus, seq_len)
        print(f"  {f'{model} {gpus}x{gpu} seq {seq_len}':32s} {searched:>11d} {rate:>9.0f}")


if __name__ == "__main__":
    main()
