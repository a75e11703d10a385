"""How many threads each process of a ``--cpu`` run uses (``OMP_NUM_THREADS``), and this machine's facts for it.

torch's default is one intra-op thread per logical CPU in every process. On a machine whose cores are busy (other
jobs, or the other ranks of the same run) those threads wait on each other: the README's CPU demo on a loaded
2-core machine ran 7–8× faster with ``OMP_NUM_THREADS=1``, with identical losses (issue 29, item 9), and torchrun
prints a banner when it has to pick the number itself. The rule (measured by ``benchmarks/cpu_threads.py``; the
figures are in docs/launcher.md): the physical cores not already busy (one-minute load average), shared out
between the run's processes on this node, at least 1. A value the user set is never changed.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

THREADS_VARIABLE: Final[str] = "OMP_NUM_THREADS"
"""Read by torch (``torch.get_num_threads``' default), OpenMP and MKL."""


def cpu_threads(*, processes: int, physical_cores: int, load_average: float) -> int:
    """Threads per process: ``(physical_cores − round(load_average)) // processes``, at least 1.

    Args:
        processes: processes of the run on this node (ranks per node).
        physical_cores: physical cores this process may use (SMT siblings counted once).
        load_average: the one-minute load average before the run starts (runnable processes of others).
    """
    idle_cores = physical_cores - round(load_average)
    return max(1, idle_cores // max(1, processes))


def physical_cores(
    logical: int, siblings_file: Path = Path("/sys/devices/system/cpu/cpu0/topology/thread_siblings_list")
) -> int:
    """Physical cores among ``logical`` usable CPUs: divided by the SMT siblings of cpu0 (Linux sysfs), at least 1.

    ``thread_siblings_list`` is ``0`` (no SMT), ``0,64`` or ``0-1``; where it cannot be read every CPU counts.
    """
    try:
        text = siblings_file.read_text(encoding="ascii").strip()
    except OSError:
        return max(1, logical)
    siblings = 0
    for part in text.split(","):
        low, _, high = part.partition("-")
        siblings += (int(high) - int(low) + 1) if high else 1
    return max(1, logical // max(1, siblings))


def host_cpu() -> tuple[int, float]:
    """This machine's (physical cores this process may use, one-minute load average; 0.0 where unknown)."""
    logical = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = 0.0
    return physical_cores(logical), load


def cpu_thread_env(processes: int) -> dict[str, str]:
    """``{"OMP_NUM_THREADS": N}`` for a ``--cpu`` run of ``processes`` per node, or {} when the user set it."""
    if os.environ.get(THREADS_VARIABLE):
        return {}
    cores, load = host_cpu()
    return {THREADS_VARIABLE: str(cpu_threads(processes=processes, physical_cores=cores, load_average=load))}
