"""The integration tests' subprocess helper kills a hung torchrun together with its workers (each in a session of
its own), so that a hang fails one test instead of blocking the whole run (it once blocked a CI run)."""

from __future__ import annotations

import sys
from pathlib import Path

import psutil
import pytest
from trainer_helpers import run_command

SLEEPER = """
import os, sys, time
from pathlib import Path
Path(sys.argv[1], str(os.getpid())).write_text("")
time.sleep(600)
"""


@pytest.mark.slow
def test_a_hung_torchrun_is_killed_with_its_workers(tmp_path: Path) -> None:
    script = tmp_path / "sleeper.py"
    script.write_text(SLEEPER)
    started = tmp_path / "started"
    started.mkdir()
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", str(script)]
    with pytest.raises(AssertionError, match="timed out after 20 s"):
        run_command([*command, str(started)], timeout_s=20)
    worker_pids = [int(path.name) for path in started.iterdir()]
    assert len(worker_pids) == 2  # both workers had started before the timeout
    alive = [pid for pid in worker_pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"]
    assert not alive
