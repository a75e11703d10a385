"""This machine's CPU, for ``--cpu`` runs: its bf16 instructions, its usable physical cores, the threads busy now.

Standard library only; the one home of these facts (the training core reads the first, the launcher's
``OMP_NUM_THREADS`` rule, :mod:`autotune.launcher.cputhreads`, the other two).

**bf16.** Without bf16 instructions a bf16 matmul is emulated (converted to fp32 and back around each kernel) and
runs several times slower than fp32 (issue 19: ~20x on the CPU it was measured on; the README's CPU demo then took
21 minutes for 10 steps), so a ``--cpu`` run of a bf16 plan trains in fp32 there
(``autotune.trainer.model.choose_precision``) and ``autotune launch`` says so. Read from the kernel's CPU flags
(``/proc/cpuinfo``): on x86 ``avx512_bf16`` (AVX512-BF16: Intel Cooper Lake / Sapphire Rapids and later, AMD Zen 4
and later) or ``amx_bf16`` (Intel AMX); on Arm the ``bf16`` feature (Armv8.6 BFloat16). Where the flags cannot be
read (macOS, no /proc), bf16 is taken as missing: fp32 is never wrong, only slower where bf16 would have been fast.

**Busy threads** are what runs now: the median over a fifth of a second of the runnable threads other than this one
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

CPUINFO: Final[Path] = Path("/proc/cpuinfo")

BF16_FLAGS: Final[frozenset[str]] = frozenset({"avx512_bf16", "amx_bf16", "bf16"})
"""CPU flags (x86 ``flags``, Arm ``Features``) that mean native bf16 arithmetic."""


def cpu_bf16_flags(cpuinfo: Path = CPUINFO) -> frozenset[str]:
    """The bf16 flags of the first CPU listed in ``cpuinfo`` (empty when none, or the file cannot be read)."""
    try:
        with cpuinfo.open(encoding="utf-8", errors="replace") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                if key.strip() in ("flags", "Features"):
                    return frozenset(value.split()) & BF16_FLAGS
    except OSError:
        pass
    return frozenset()


def cpu_has_bf16(cpuinfo: Path = CPUINFO) -> bool:
    """True when this CPU has native bf16 instructions (:data:`BF16_FLAGS`)."""
    return bool(cpu_bf16_flags(cpuinfo))


def cpu_precision_note(precision: str, cpuinfo: Path = CPUINFO) -> str | None:
    """The note for a ``--cpu`` run of a plan with ``precision``: None when it runs as planned.

    When the plan computes in bf16 on a CPU without bf16 instructions, the note says that it trains in fp32 and why.
    """
    if precision == "fp32" or cpu_has_bf16(cpuinfo):  # fp16-mixed runs as bf16-mixed on the CPU
        return None
    return (
        f"this CPU has no bf16 instructions (no {', '.join(sorted(BF16_FLAGS))} flag in {cpuinfo}): the --cpu run "
        f"trains in fp32 instead of {precision} (bf16 would be emulated, several times slower)"
    )


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
