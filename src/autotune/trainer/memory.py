"""Peak memory of this process: GPU allocator statistics, or the process peak RSS on the CPU."""

from __future__ import annotations

import resource
import sys

import torch

from autotune.units import GIB


def peak_memory() -> tuple[float, float | None, str]:
    """(peak GiB, peak reserved GiB or None, kind) for this process.

    On a GPU: ``torch.cuda.max_memory_allocated`` / ``max_memory_reserved`` of the current device,
    kind "allocated". On the CPU: ``getrusage(RUSAGE_SELF).ru_maxrss`` (KiB on Linux, bytes on macOS,
    per getrusage(2)), kind "cpu-rss"; it counts the whole process (interpreter, libraries, data).
    """
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        return (
            torch.cuda.max_memory_allocated() / GIB,
            torch.cuda.max_memory_reserved() / GIB,
            "allocated",
        )
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    rss_bytes = maxrss if sys.platform == "darwin" else maxrss * 1024
    return rss_bytes / GIB, None, "cpu-rss"
