"""Threads of a ``--cpu`` run (issue 29 items 6 and 9): the rule and the launch's environment (the machine's facts:
tests/unit/test_hostcpu.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from plans import make_plan

from autotune.launcher import LaunchOptions, build_launch_spec, cputhreads
from autotune.launcher.cputhreads import cpu_threads


@pytest.mark.parametrize(
    ("processes", "cores", "load", "threads"),
    [(1, 8, 0.0, 8), (2, 8, 0.0, 4), (1, 8, 6.2, 2), (1, 2, 2.0, 1), (1, 2, 4.7, 1), (3, 8, 0.0, 2), (16, 8, 0.0, 1)],
)
def test_the_rule_shares_the_idle_physical_cores(processes: int, cores: int, load: float, threads: int) -> None:
    assert cpu_threads(processes=processes, physical_cores=cores, busy=load) == threads


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
