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


def _vm_hwm_gib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024 / GIB  # kB
    raise AssertionError("no VmHWM in /proc/self/status")


def test_on_the_cpu_the_peak_is_the_processs_peak_rss_with_no_reserved_figure() -> None:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        pytest.skip("a GPU is in use: the allocator's figures are reported")
    before = _vm_hwm_gib()
    peak_gib, reserved_gib, kind = peak_memory()
    after = _vm_hwm_gib()
    assert kind == "cpu-rss" and reserved_gib is None
    assert before - SLACK_GIB <= peak_gib <= after + SLACK_GIB


def test_the_peak_rises_when_the_process_touches_more_memory() -> None:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        pytest.skip("a GPU is in use: the allocator's figures are reported")
    start, _, _ = peak_memory()
    block = torch.ones(int((start + 0.1) * GIB) // 4, dtype=torch.float32)  # more than the peak so far, touched
    assert peak_memory()[0] >= start + 0.05
    del block
