"""Launcher tests: launches without ``--cpu`` probe the GPU; these tests describe GPU machines.

(The plans' hub model ids are in the test-wide offline hub cache: ``tests/conftest.py``.)"""

from __future__ import annotations

import pytest

from autotune.launcher import cputhreads, gpus, preflight

REAL_GPU_PROBE = preflight.check_gpu_visible
"""The real probe, for the tests of it (they set it back with monkeypatch)."""


@pytest.fixture(autouse=True)
def _a_gpu_is_visible(monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPU probe passes here (a subprocess importing torch per test would cost seconds). Tests of the probe
    restore :data:`REAL_GPU_PROBE`."""
    monkeypatch.setattr(preflight, "check_gpu_visible", lambda: None)


@pytest.fixture(autouse=True)
def _no_gpu_tool(monkeypatch: pytest.MonkeyPatch) -> None:
    """No ``nvidia-smi`` / ``rocm-smi`` answers (as on CI), whatever this machine has; the GPU type and count
    tests name the GPUs they describe."""
    monkeypatch.setattr(gpus, "detect_gpus", lambda: [])


@pytest.fixture(autouse=True)
def _a_quiet_four_core_host(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--cpu`` launches see 4 idle physical cores and no OMP_NUM_THREADS of the user's (deterministic specs)."""
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(cputhreads, "host_cpu", lambda: (4, 0.0))
