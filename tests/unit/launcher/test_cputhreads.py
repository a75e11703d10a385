"""Threads of a ``--cpu`` run (issue 29 items 6 and 9): the rule, this machine's facts, and the launch's environment."""

from __future__ import annotations

import multiprocessing
from multiprocessing.synchronize import Event
from pathlib import Path

import pytest
from plans import make_plan

from autotune.launcher import LaunchOptions, build_launch_spec, cputhreads
from autotune.launcher.cputhreads import cpu_threads, physical_cores, runnable_others


def _spin(spinning: Event, stop: Event) -> None:
    spinning.set()
    while not stop.is_set():
        pass


@pytest.mark.parametrize(
    ("processes", "cores", "load", "threads"),
    [(1, 8, 0.0, 8), (2, 8, 0.0, 4), (1, 8, 6.2, 2), (1, 2, 2.0, 1), (1, 2, 4.7, 1), (3, 8, 0.0, 2), (16, 8, 0.0, 1)],
)
def test_the_rule_shares_the_idle_physical_cores(processes: int, cores: int, load: float, threads: int) -> None:
    assert cpu_threads(processes=processes, physical_cores=cores, busy=load) == threads


@pytest.mark.parametrize(("siblings", "logical", "physical"), [("0", 8, 8), ("0,4", 8, 4), ("0-1", 16, 8)])
def test_physical_cores_fold_smt_siblings(tmp_path: Path, siblings: str, logical: int, physical: int) -> None:
    path = tmp_path / "thread_siblings_list"
    path.write_text(siblings + "\n")
    assert physical_cores(logical, path) == physical
    assert physical_cores(logical, tmp_path / "missing") == logical


def test_a_cpu_launch_sets_the_threads_for_its_processes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cputhreads, "host_cpu", lambda: (8, 0.0))
    two = build_launch_spec(
        make_plan(sharding="ddp", gpus=2), LaunchOptions(dataset="d", output_dir=str(tmp_path), cpu=True)
    )
    assert two.env["OMP_NUM_THREADS"] == "4"  # torchrun prints its OMP_NUM_THREADS banner only when it is unset
    one = build_launch_spec(make_plan(), LaunchOptions(dataset="d", output_dir=str(tmp_path), cpu=True))
    assert one.env["OMP_NUM_THREADS"] == "8"
    gpu = build_launch_spec(make_plan(), LaunchOptions(dataset="d", output_dir=str(tmp_path)))
    assert "OMP_NUM_THREADS" not in gpu.env


def test_the_users_thread_count_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    spec = build_launch_spec(make_plan(), LaunchOptions(dataset="d", output_dir=str(tmp_path), cpu=True))
    assert "OMP_NUM_THREADS" not in spec.env  # the run inherits the user's 3


def test_busy_is_the_median_of_the_other_runnable_threads(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    stat.write_text("cpu  1 2 3 4\nprocs_running 3\nprocs_blocked 0\n")
    assert runnable_others(stat, samples=3, interval_s=0.0) == 2.0  # the reader itself is one of the 3
    stat.write_text("cpu  1 2 3 4\nprocs_blocked 0\n")
    assert runnable_others(stat, samples=3, interval_s=0.0) is None
    assert runnable_others(tmp_path / "missing", samples=3, interval_s=0.0) is None


def test_a_thread_spinning_beside_the_reader_counts_as_busy(tmp_path: Path) -> None:
    stat = Path("/proc/stat")
    if runnable_others(stat, samples=1, interval_s=0.0) is None:
        pytest.skip("no /proc/stat procs_running here")
    spinning = multiprocessing.get_context("spawn").Event()
    stop = multiprocessing.get_context("spawn").Event()
    worker = multiprocessing.get_context("spawn").Process(target=_spin, args=(spinning, stop), daemon=True)
    worker.start()
    try:
        assert spinning.wait(60)  # the marker: the worker is in its loop
        readings = [runnable_others(stat, samples=1, interval_s=0.0) for _ in range(50)]
        assert max(r or 0.0 for r in readings) >= 1.0
    finally:
        stop.set()
        worker.join(10)
