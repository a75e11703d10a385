"""How many threads each process of a ``--cpu`` run uses (``OMP_NUM_THREADS``), from this machine's CPU.

torch's default is one intra-op thread per logical CPU in every process. On a machine whose cores are busy (other
jobs, or the other ranks of the same run) those threads wait on each other: the README's CPU demo on a loaded
2-core machine ran 7–8× faster with ``OMP_NUM_THREADS=1``, with identical losses (issue 29, item 9), and torchrun
prints a banner when it has to pick the number itself. The rule (measured by ``benchmarks/cpu_threads.py``; the
figures are in docs/launcher.md): the physical cores not already busy, shared out between the run's processes on
this node, at least 1. A value the user set is never changed.

The machine's facts (its usable physical cores, the threads busy now) are :func:`autotune.hostcpu.host_cpu`, the one
home of what this machine's CPU is and does.
"""

from __future__ import annotations

import os
from typing import Final

from autotune.hostcpu import host_cpu

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


def cpu_thread_env(processes: int) -> dict[str, str]:
    """``{"OMP_NUM_THREADS": N}`` for a ``--cpu`` run of ``processes`` per node, or {} when the user set it."""
    if os.environ.get(THREADS_VARIABLE):
        return {}
    cores, busy = host_cpu()
    return {THREADS_VARIABLE: str(cpu_threads(processes=processes, physical_cores=cores, busy=busy))}
