"""Launcher tests: launches without ``--cpu`` probe the GPU; these tests describe GPU machines.

(The plans' hub model ids are in the test-wide offline hub cache: ``tests/conftest.py``.)"""

from __future__ import annotations

import functools

import pytest

from autotune.errors import InvalidRequestError
from autotune.launcher import cputhreads, gpus, preflight

REAL_GPU_PROBE = preflight.check_gpu_visible
"""The real probe: a subprocess of this Python that imports torch (~5 s of CPU)."""


@functools.cache
def _real_probe_refusal() -> str | None:
    """The real probe's refusal on this machine (None: it let the launch go on), asked once per worker."""
    try:
        REAL_GPU_PROBE()
    except InvalidRequestError as refusal:
        return str(refusal)
    return None


def replayed_gpu_probe() -> None:
    """:data:`REAL_GPU_PROBE` as the tests of a launch without ``--cpu`` use it (set with monkeypatch): the real probe
    runs once per worker, and its outcome — the refusal raised again, or nothing — answers every launch after it (the
    machine's GPUs do not change between tests; each launch still calls the probe where it would)."""
    refusal = _real_probe_refusal()
    if refusal is not None:
        raise InvalidRequestError(refusal)


def torch_sees_a_gpu() -> bool:
    """Whether the real probe let a launch without ``--cpu`` go on here (torch sees a GPU, or it could not tell)."""
    return _real_probe_refusal() is None


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
