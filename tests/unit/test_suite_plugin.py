"""tests/helpers/suite_plugin.py: tests that start the training core are marked by what they call, an unmarked one
that starts it fails, and a SIGINT swallowed by the code under test still ends the session."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

from suite_plugin import extensions_dir, reaches

HELPERS = Path(__file__).resolve().parents[1] / "helpers"
CONFTEST = f"import sys\nsys.path.insert(0, {str(HELPERS)!r})\npytest_plugins = ['suite_plugin']\n"

SAMPLES = """
import trainer_helpers
from trainer_helpers import run_trainer

TARGETS = (getattr(trainer_helpers, "trainer_" + "env"),)

def calls_a_helper():
    return run_trainer("--help")

def imports_inside():
    from trainer_helpers import trainer_env as env
    return env()

def plans_only():
    return sorted([3, 1])
"""
"""Functions whose code the marking reads (compiled here: this test module itself must not name the helpers, or it
would be marked as starting the core)."""


def test_a_test_reaches_the_core_through_helpers_and_local_imports() -> None:
    namespace: dict[str, object] = {}
    exec(SAMPLES, namespace)
    targets = namespace["TARGETS"]
    assert reaches(namespace["calls_a_helper"], targets, set())  # run_trainer → run_command → trainer_env
    assert reaches(namespace["imports_inside"], targets, set())
    assert not reaches(namespace["plans_only"], targets, set())


INNER_ENV = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
"""The inner sessions load only the plugins they name (not hypothesis, anyio, pytest-timeout: ~5 s of imports each)."""


def _pytest(tmp_path: Path, source: str, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_inner.py").write_text(source)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args, str(tmp_path)]
    return subprocess.run(
        command, capture_output=True, text=True, cwd=tmp_path, timeout=120, check=False, env=INNER_ENV
    )


SWALLOWED_SIGINT = """
import os, signal, time
import pytest

def _swallow(signum, frame):  # as autotune launch's forwarder (or the CLI's exit 130) does
    pass

def test_a(request):
    previous = signal.signal(signal.SIGINT, _swallow)
    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.2)
    finally:
        signal.signal(signal.SIGINT, previous)

def test_b():
    pass
"""


def test_a_sigint_the_code_under_test_swallowed_ends_the_session(tmp_path: Path) -> None:
    done = _pytest(tmp_path, SWALLOWED_SIGINT)
    assert done.returncode == 2, done.stdout  # pytest's exit code for an interrupted session
    assert "KeyboardInterrupt" in done.stdout and "1 passed" not in done.stdout, done.stdout


def test_a_sigint_a_test_sends_itself_on_purpose_does_not(tmp_path: Path) -> None:
    source = SWALLOWED_SIGINT.replace("def test_a(request):", "def test_a(sends_itself_sigint):")
    done = _pytest(tmp_path, source)
    assert done.returncode == 0 and "2 passed" in done.stdout, done.stdout


UNMARKED_CORE_START = """
import subprocess, sys

def test_starts_the_core_its_own_way():
    subprocess.run([sys.executable, "-c", "pass", "autotune.trainerless"], check=True)  # not the core's package
    subprocess.run([sys.executable, "-c", "pass", "-m", "autotune.trainer.lengths"], check=True)  # the dataset scan
"""


def test_an_unmarked_test_that_starts_the_core_fails_and_a_marked_one_runs_with_all(tmp_path: Path) -> None:
    done = _pytest(tmp_path, UNMARKED_CORE_START)
    assert done.returncode == 1 and "starts the training core" in done.stdout, done.stdout
    assert "autotune.trainer.lengths" in done.stdout and "autotune.trainerless" not in done.stdout
    marked = UNMARKED_CORE_START.replace("def test_", "@__import__('pytest').mark.slow\ndef test_")
    assert "1 deselected" in _pytest(tmp_path, marked).stdout
    done = _pytest(tmp_path, marked, "--all")
    assert done.returncode == 0 and "1 passed" in done.stdout, done.stdout


def test_stale_extension_build_locks_are_removed_only_when_no_other_session_runs(tmp_path: Path) -> None:
    lock = tmp_path / "torch-extensions" / "cpu_adam" / "lock"
    lock.parent.mkdir(parents=True)
    lock.touch()
    root, other_session = extensions_dir(tmp_path)  # alone: a killed build left the lock
    assert root == tmp_path / "torch-extensions" and not lock.exists() and other_session is not None
    lock.touch()  # now another session (still holding its shared lock) is building
    _, this_session = extensions_dir(tmp_path)
    assert lock.exists() and this_session is not None
    for handle in (other_session, this_session):
        fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()


GROUPED = """
import os
import pytest

def _worker(name):
    with open(os.path.join(os.path.dirname(__file__), name), "w") as f:
        f.write(os.environ["PYTEST_XDIST_WORKER"])

@pytest.mark.xdist_group("shared")
@pytest.mark.parametrize("i", range(4))
def test_grouped(i):
    _worker(f"grouped-{i}")

@pytest.mark.parametrize("i", range(8))
def test_free(i):
    pass
"""


def test_the_tests_of_one_xdist_group_run_on_one_worker(tmp_path: Path) -> None:
    """pyproject's ``--dist loadgroup`` holds: a shared fixture is built once (pytest 9.2 broke it silently,
    pytest-dev/pytest-xdist#1386)."""
    (tmp_path / "test_inner.py").write_text(GROUPED)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "xdist.plugin", "-n", "2"]
    command += ["--dist", "loadgroup", str(tmp_path)]
    done = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, timeout=120, env=INNER_ENV)
    assert done.returncode == 0, done.stdout + done.stderr
    workers = {(tmp_path / f"grouped-{i}").read_text() for i in range(4)}
    assert len(workers) == 1, workers
