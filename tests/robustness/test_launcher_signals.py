"""The run dies with its launcher (SIGKILL, SIGHUP, SIGTERM) unless detached; Ctrl-C during load is one line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

CHILD = "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(60)"
LAUNCHER = (
    "import sys; from autotune.launcher.runner import run_command; "
    "sys.exit(run_command(['python', '-c', sys.argv[1], sys.argv[2]], {}))"
)


def _wait_for(path: Path, timeout_s: float = 20) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and path.read_text():
            return int(path.read_text())
        time.sleep(0.05)
    raise AssertionError(f"{path} never written")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped by init) counts as dead
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split()[2] != "Z"
    except OSError:
        return True


def _gone(pid: int, timeout_s: float = 10) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def _start_launcher(tmp_path: Path) -> tuple[subprocess.Popen[bytes], int]:
    pid_file = tmp_path / "child.pid"
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER, CHILD, str(pid_file)])
    return launcher, _wait_for(pid_file)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signal is Linux-only")
def test_sigkill_of_launcher_kills_the_run(tmp_path: Path) -> None:
    launcher, child = _start_launcher(tmp_path)
    launcher.kill()
    launcher.wait()
    assert _gone(child), "the run outlived its SIGKILLed launcher"


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM, signal.SIGINT])
def test_signal_to_launcher_is_forwarded(tmp_path: Path, sig: signal.Signals) -> None:
    launcher, child = _start_launcher(tmp_path)
    launcher.send_signal(sig)
    assert launcher.wait(timeout=20) in (128 + sig, 1)  # child killed by sig → 128 + sig
    assert _gone(child)


def test_detached_run_survives_its_launcher(tmp_path: Path) -> None:
    from autotune.launcher.runner import run_detached

    pid_file = tmp_path / "child.pid"
    log = tmp_path / "launch.log"
    pid = run_detached(["python", "-c", CHILD + "; print('x')", str(pid_file)], {}, log)
    try:
        assert _wait_for(pid_file) == pid
        assert os.getsid(pid) == pid  # its own session: no SIGHUP from our terminal
        time.sleep(0.2)
        assert _alive(pid)
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def test_ctrl_c_while_loading_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    import autotune.trainer.__main__ as entry

    def interrupted(args: object) -> None:
        raise KeyboardInterrupt

    fake_train = type(sys)("autotune.trainer.train")
    fake_train.run = interrupted  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "autotune.trainer.train", fake_train)
    code = entry.main(["--plan", "p.yaml", "--dataset", "d.jsonl", "--output-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 130
    assert err.count("\n") == 1 and err.startswith("error: interrupted before training started")


EARLY_CHILD = (
    "import os, signal, sys, time; signal.signal(signal.SIGINT, signal.SIG_DFL); "  # as before Python's handler
    "open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(60)"
)


def test_ctrl_c_before_the_run_has_a_handler_is_one_line_and_130(tmp_path: Path) -> None:
    """Issue 19 item 6: a run killed by the forwarded SIGINT while its interpreter starts (no handler yet) used
    to end with -2 and no message. The child writes its pid once it is running (the marker), then SIGINT."""
    pid_file = tmp_path / "child.pid"
    launcher = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER, EARLY_CHILD, str(pid_file)], stderr=subprocess.PIPE, text=True
    )
    child = _wait_for(pid_file)
    launcher.send_signal(signal.SIGINT)
    _, err = launcher.communicate(timeout=20)
    assert launcher.returncode == 130
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: stopped by SIGINT while the run was starting"), err
    assert _gone(child)
