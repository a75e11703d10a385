"""An interrupted run exits 130 (SIGINT) / 143 (SIGTERM), whatever the process between returned."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autotune.launcher.runner import exit_code

# A run that saves and exits 0 on SIGINT / SIGTERM, as torchrun or an older core would report it.
CHILD = (
    "import signal, sys, time, pathlib\n"
    "signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))\n"
    "signal.signal(signal.SIGINT, lambda *a: sys.exit(0))\n"
    "pathlib.Path(sys.argv[1]).write_text('up')\n"
    "time.sleep(60)\n"
)
LAUNCHER = (
    "import sys; from autotune.launcher.runner import run_command; "
    "sys.exit(run_command(['python', '-c', sys.argv[1], sys.argv[2]], {}))"
)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_forwarded_signal_gives_128_plus_n_even_when_the_child_exits_0(tmp_path: Path, sig: signal.Signals) -> None:
    ready = tmp_path / "ready"
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER, CHILD, str(ready)])
    deadline = time.monotonic() + 30
    while not ready.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    launcher.send_signal(sig)
    assert launcher.wait(timeout=30) == 128 + sig


def test_exit_code_rules() -> None:
    assert exit_code(0, None) == 0  # completed
    assert exit_code(-9, None) == 137  # killed by SIGKILL
    assert exit_code(1, int(signal.SIGTERM)) == 143  # torchrun's failure code after a forwarded SIGTERM
    assert exit_code(2, int(signal.SIGINT)) == 2  # a refusal stays a refusal
