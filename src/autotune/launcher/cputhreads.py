"""How many threads each process of a ``--cpu`` run uses (``OMP_NUM_THREADS``), and this machine's facts for it.

torch's default is one intra-op thread per logical CPU in every process. On a machine whose cores are busy (other
jobs, or the other ranks of the same run) those threads wait on each other: the README's CPU demo on a loaded
2-core machine ran 7–8× faster with ``OMP_NUM_THREADS=1``, with identical losses (issue 29, item 9), and torchrun
prints a banner when it has to pick the number itself. The rule (measured by ``benchmarks/cpu_threads.py``; the
figures are in docs/launcher.md): the physical cores not already busy, shared out between the run's processes on
this node, at least 1. A value the user set is never changed.

"Busy" is what runs now: the median over a fifth of a second of the runnable threads other than this one
(``procs_running`` of ``/proc/stat``, Linux). The one-minute load average, which it replaced, still counts a process
that ended a minute ago at about a third of a core: on the 2-core VM a run launched right after another got 1 thread
where 2 were idle, half the speed (``benchmarks/packing_ratio.py`` measured a packed / padded ratio 1.9× off that
way). Where ``/proc/stat`` cannot be read the load average is used.
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path
from typing import Final

THREADS_VARIABLE: Final[str] = "OMP_NUM_THREADS"
"""Read by torch (``torch.get_num_threads``' default), OpenMP and MKL."""


def cpu_threads(*, processes: int, physical_cores: int, busy: float) -> int:
    """Threads per process: ``(physical_cores − round(busy)) // processes``, at least 1.

    Args:
        processes: processes of the run on this node (ranks per node).
        physical_cores: physical cores this process may use (SMT siblings counted once).
        busy: other threads running before the run starts (:func:`host_cpu`).
    """
    idle_cores = physical_cores - round(busy)
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


BUSY_SAMPLES: Final[int] = 20
"""Readings of ``procs_running`` whose median is the busy threads (one every ``BUSY_INTERVAL_S``: 0.2 s in all)."""
BUSY_INTERVAL_S: Final[float] = 0.01
"""Seconds between two readings."""


def runnable_others(
    stat_file: Path = Path("/proc/stat"), samples: int = BUSY_SAMPLES, interval_s: float = BUSY_INTERVAL_S
) -> float | None:
    """Threads runnable now besides this one: the median over ``samples`` readings of ``procs_running`` − 1.

    ``procs_running`` (``/proc/stat``, Linux ≥ 2.5.45; proc(5)) counts the threads in the runnable state, the
    reading one included. None where the file or its line cannot be read.
    """
    readings = []
    for index in range(samples):
        try:
            text = stat_file.read_text(encoding="ascii")
        except OSError:
            return None
        counts = [line.split()[1] for line in text.splitlines() if line.startswith("procs_running ")]
        if not counts or not counts[0].isdigit():
            return None
        readings.append(max(0, int(counts[0]) - 1))
        if index + 1 < samples:
            time.sleep(interval_s)
    return float(statistics.median(readings))


def usable_physical_cores() -> int:
    """Physical cores this process may use: its CPU affinity (else every CPU), SMT siblings counted once."""
    logical = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return physical_cores(logical)


def host_cpu() -> tuple[int, float]:
    """This machine's (:func:`usable_physical_cores`, busy threads now).

    Busy: :func:`runnable_others`, or where it is unknown the one-minute load average (0.0 where that is unknown too).
    """
    busy = runnable_others()
    if busy is None:
        try:
            busy = os.getloadavg()[0]
        except OSError:
            busy = 0.0
    return usable_physical_cores(), busy


def cpu_thread_env(processes: int) -> dict[str, str]:
    """``{"OMP_NUM_THREADS": N}`` for a ``--cpu`` run of ``processes`` per node, or {} when the user set it."""
    if os.environ.get(THREADS_VARIABLE):
        return {}
    cores, busy = host_cpu()
    return {THREADS_VARIABLE: str(cpu_threads(processes=processes, physical_cores=cores, busy=busy))}
