"""Peak memory of this process (``trainer/memory.py``) on the CPU: the kernel's high-water mark of its RSS.

The reference is an independent reading of the same quantity, ``VmHWM`` in ``/proc/self/status`` (proc(5): "peak
resident set size"), taken before and after: the peak never decreases, so it lies between the two, up to the
kernel's batching of the RSS counters (per-task or per-CPU counts folded into the shared one lazily, so a reading is
approximate: measured here, ru_maxrss read 0.2 MiB below a VmHWM read just before it), bounded by :data:`SLACK_GIB`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

import torch

from autotune.trainer.memory import peak_memory
from autotune.units import GIB

SLACK_GIB = 8 / 1024
"""8 MiB: forty times the difference measured on this machine (0.2 MiB), far below the 100 MiB the next test adds."""

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status (Linux)")


def _status_gib(field: str) -> float:
    """``VmHWM`` (peak RSS) or ``VmRSS`` (current RSS) of this process, from ``/proc/self/status`` (kB there)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024 / GIB
    raise AssertionError(f"no {field} in /proc/self/status")


RISE_GIB = 0.1
"""How far past the peak so far the second test takes the process (100 MiB, touched page by page)."""

MAX_TOUCH_GIB = 1.0
"""The most the second test allocates: a long-lived worker whose RSS fell far below its peak is not pushed past it."""


def test_on_the_cpu_the_peak_is_the_processs_peak_rss_with_no_reserved_figure() -> None:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        pytest.skip("a GPU is in use: the allocator's figures are reported")
    before = _status_gib("VmHWM")
    peak_gib, reserved_gib, kind = peak_memory()
    after = _status_gib("VmHWM")
    assert kind == "cpu-rss" and reserved_gib is None
    assert before - SLACK_GIB <= peak_gib <= after + SLACK_GIB


def test_the_peak_rises_when_the_process_touches_more_memory() -> None:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        pytest.skip("a GPU is in use: the allocator's figures are reported")
    start, _, _ = peak_memory()
    touch_gib = start - _status_gib("VmRSS") + RISE_GIB  # from the current RSS to past the peak
    if touch_gib > MAX_TOUCH_GIB:
        pytest.skip(f"this process's RSS is {touch_gib - RISE_GIB:.1f} GiB below its peak: not allocated past it")
    block = torch.ones(int(touch_gib * GIB) // 4, dtype=torch.float32)  # every page written
    assert peak_memory()[0] >= start + RISE_GIB / 2
    del block
