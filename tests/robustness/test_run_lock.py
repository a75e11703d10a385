"""One run per directory: the lock names its owner, dies with it, and is taken over when stale."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from plans import make_plan

from autotune import run_lock
from autotune.errors import InvalidRequestError
from autotune.launcher import LaunchOptions, build_launch_spec, run_launch

HOLDER = (
    "import sys, time; from autotune import run_lock; run_lock.acquire(sys.argv[1]); "
    "print('held', flush=True); time.sleep(60)"
)


def _hold(directory: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(directory)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_acquire_writes_owner_and_release_removes(tmp_path: Path) -> None:
    lock = run_lock.acquire(tmp_path / "run")
    owner = json.loads((tmp_path / "run" / run_lock.LOCK_FILE).read_text())
    assert owner["pid"] == os.getpid() and owner["host"] == socket.gethostname()
    lock.release()
    lock.release()  # idempotent
    assert not (tmp_path / "run" / run_lock.LOCK_FILE).exists()


def test_second_owner_refused_with_pid_and_host(tmp_path: Path) -> None:
    holder = _hold(tmp_path)
    try:
        with pytest.raises(InvalidRequestError) as caught:
            run_lock.acquire(tmp_path)
        assert f"pid {holder.pid}" in str(caught.value) and socket.gethostname() in str(caught.value)
        with pytest.raises(InvalidRequestError):
            run_lock.probe(tmp_path)
    finally:
        holder.kill()
        holder.wait()


def test_lock_of_killed_owner_is_taken_over(tmp_path: Path) -> None:
    holder = _hold(tmp_path)
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    run_lock.probe(tmp_path)  # free again
    lock = run_lock.acquire(tmp_path)
    assert lock.previous_owner is not None and lock.previous_owner["pid"] == holder.pid
    lock.release()


def test_without_flock_a_dead_pid_of_this_host_is_stale(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(run_lock, "_try_flock", lambda fd, shared=False: None)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    owner = {"pid": dead.pid, "host": socket.gethostname(), "started_at": "then"}
    (tmp_path / run_lock.LOCK_FILE).write_text(json.dumps(owner))
    lock = run_lock.acquire(tmp_path)
    assert lock.previous_owner == owner
    lock.release()


def test_without_flock_another_hosts_lock_is_respected(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(run_lock, "_try_flock", lambda fd, shared=False: None)
    owner = {"pid": 1, "host": "elsewhere", "started_at": "then"}
    (tmp_path / run_lock.LOCK_FILE).write_text(json.dumps(owner))
    with pytest.raises(InvalidRequestError, match="elsewhere"):
        run_lock.acquire(tmp_path)
    assert json.loads((tmp_path / run_lock.LOCK_FILE).read_text()) == owner


def test_launch_into_a_locked_directory_is_refused_before_writing(tmp_path: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    holder = _hold(out)
    try:
        spec = build_launch_spec(make_plan(), LaunchOptions(dataset="d", output_dir=str(out), resume=True))
        spec = spec.model_copy(update={"argv": ["python", "-c", "pass"]})
        started = time.perf_counter()
        with pytest.raises(InvalidRequestError, match="in use"):
            run_launch(spec, out, resume=True, dry_run=False)
        assert time.perf_counter() - started < 5
        assert sorted(p.name for p in out.iterdir()) == [run_lock.LOCK_FILE]  # nothing written
    finally:
        holder.kill()
        holder.wait()
