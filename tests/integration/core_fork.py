"""Runs of the training core forked from one process that imported the training stack once (per xdist worker).

A run of ``python -m autotune.trainer`` spends about 6.4 of its 7.1 s of CPU importing torch, transformers, peft,
bitsandbytes, accelerate and datasets (measured on the 2-core machine: ``python -c "import autotune.trainer.train"``
against a 1-step run of the tiny model), so the tests that run the core many times (a resume stopped three times, a
refusal per bad input) pay mostly for interpreter starts. The standard library's ``multiprocessing`` forkserver
imports :data:`PRELOAD` once in a server process and forks a child from it per run: each child runs the core's real
entry point, :func:`autotune.trainer.__main__.main`, with the run's arguments, environment, working directory and
output files, in a session of its own (``os.setsid``, as ``start_new_session=True``), and ends with its exit code (a
signal's death reads as ``-N``, as ``subprocess`` reports it). ``tests/robustness/fault_harness.py`` forks the same
way for its twenty kills.

What a fork does not repeat is the interpreter's start and the imports: the output the training stack prints while
it is imported is not in a forked run's stderr (``tests/unit/test_quiet.py`` checks that in a real interpreter), and
the variables the libraries read once at import (the hub's and ``datasets``' cache directories) are those the server
started with, the first forked run's in the worker (every run sets its whole environment before the core starts, and
the caches are test directories). A test about the process itself (Ctrl-C during the imports, another thread count at
start, torchrun, the launcher) starts a real interpreter (``trainer_helpers.run_command``).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import subprocess
import sys
import traceback
from collections.abc import Iterator
from multiprocessing.connection import Connection
from typing import IO, Any

PRELOAD = ["autotune.trainer.train"]
"""What the server imports before it forks: the core's module that imports the whole training stack."""

_CONTEXT: list[Any] = []


def _context(env: dict[str, str]) -> Any:
    """The forkserver context, its server started (once per process) with ``env`` as its environment."""
    if not _CONTEXT:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(PRELOAD)
        from multiprocessing import forkserver

        saved = dict(os.environ)
        os.environ.clear()
        os.environ.update(env)
        try:
            forkserver.ensure_running()  # the server inherits this environment
        finally:
            os.environ.clear()
            os.environ.update(saved)
        _CONTEXT.append(context)
    return _CONTEXT[0]


def _core_child(argv: list[str], env: dict[str, str], cwd: str, stdout: Connection, stderr: Connection) -> None:
    """The forked child: a session of its own, the run's environment, directory and output; the core's entry point."""
    os.setsid()
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    os.dup2(stdout.fileno(), 1)
    os.dup2(stderr.fileno(), 2)
    stdout.close()
    stderr.close()
    code = 1
    try:
        from autotune.trainer.__main__ import main

        code = main(argv)
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    except BaseException:
        traceback.print_exc()  # as the interpreter prints an uncaught exception
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


class ForkedCore:
    """A forked run of the core: ``pid``, ``wait``, ``send_signal``, ``kill`` as :class:`subprocess.Popen` has them."""

    def __init__(self, argv: list[str], env: dict[str, str], stdout: IO[Any], stderr: IO[Any]) -> None:
        """Start the run with its output written to ``stdout`` / ``stderr`` (files or pipes, any open descriptor)."""
        context = _context(env)
        out, err = (
            Connection(os.dup(stdout.fileno()), readable=False),
            Connection(os.dup(stderr.fileno()), readable=False),
        )
        try:
            self._process = context.Process(target=_core_child, args=(argv, env, os.getcwd(), out, err), daemon=False)
            self._process.start()
        finally:
            out.close()
            err.close()
        assert self._process.pid is not None  # started
        self.pid: int = self._process.pid

    def wait(self, timeout: float | None = None) -> int:
        """The exit code (``-N`` for a death by signal N).

        Raises:
            subprocess.TimeoutExpired: the run outlasts ``timeout`` seconds (it goes on), as ``Popen.wait`` raises.
        """
        self._process.join(timeout)
        code = self._process.exitcode
        if code is None:
            raise subprocess.TimeoutExpired(f"forked core {self.pid}", timeout or 0.0)
        return code

    def ended(self) -> bool:
        """Whether the run has ended (without waiting)."""
        self._process.join(0)
        return self._process.exitcode is not None

    def send_signal(self, sig: int) -> None:
        """Send ``sig`` to the run's process (not its children)."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, sig)

    def kill(self) -> None:
        """SIGKILL the run's whole session (the run and anything it started)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)


@contextlib.contextmanager
def stderr_lines(argv: list[str], env: dict[str, str], stdout: IO[Any]) -> Iterator[tuple[ForkedCore, IO[str]]]:
    """A forked run whose stderr is read line by line as it is written (the log lines are the tests' markers)."""
    read_fd, write_fd = os.pipe()
    with os.fdopen(write_fd, "w") as writer:
        run = ForkedCore(argv, env, stdout, writer)
    with os.fdopen(read_fd) as reader:
        try:
            yield run, reader
        finally:
            if not run.ended():
                run.kill()  # the test ended (or failed) while the run went on
            run.wait()
