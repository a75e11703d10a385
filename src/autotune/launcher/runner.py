"""The thin runner: write a :class:`LaunchSpec`'s files into the run directory and run its command.

Never overwrites or deletes anything: an existing output directory is refused unless resuming, and
when resuming, a file that is already there must hold what would be written (``plan.yaml`` is
compared as a plan, so comments and formatting do not matter).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from autotune import run_lock
from autotune.errors import AutotuneError, ConfigError, InvalidRequestError
from autotune.fileio import write_atomic
from autotune.launcher.options import INTERPRETER_MODULES, PLAN_FILE, LaunchSpec
from autotune.schemas.plan_io import plan_from_yaml

_FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""Sent on to the run: Ctrl-C, ``kill``, and a closed terminal or ssh session (SIGHUP)."""

_PR_SET_PDEATHSIG = 1
"""``prctl(2)`` option: the signal the kernel sends this process when its parent thread dies (Linux)."""

DETACHED_LOG_FILE = "launch.log"
"""A detached run's stdout and stderr, in the run directory."""


def parent_death_hook(signum: int = signal.SIGTERM) -> Callable[[], None] | None:
    """A ``preexec_fn`` making the child get ``signum`` when the launcher dies, even by SIGKILL (Linux).

    ``prctl(PR_SET_PDEATHSIG)`` through libc (ctypes), looked up here in the parent so that the
    child, between fork and exec, only calls ``prctl``, ``getppid`` and ``kill``. If the launcher
    died before the call (the child was re-parented), the signal is sent at once. SIGTERM lets the
    training core save a checkpoint and stop (its signal callback); torchrun passes it on to its
    workers. None where prctl does not exist (macOS): there only the forwarded signals stop the run.
    """
    import ctypes
    import ctypes.util

    try:
        prctl = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def hook() -> None:
        prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0)
        if os.getppid() != parent:
            os.kill(os.getpid(), signum)

    return hook


def resolve_argv(argv: Sequence[str]) -> list[str]:
    """The argv to execute: ``python`` / ``torchrun`` / ``accelerate`` become ``sys.executable [-m ...]``."""
    prefix = INTERPRETER_MODULES.get(argv[0])
    if prefix is None:
        return list(argv)
    return [sys.executable, *prefix, *argv[1:]]


def check_command(argv: Sequence[str]) -> None:
    """Refuse a command whose program cannot be found (before anything is written).

    Raises:
        InvalidRequestError: the program is not on PATH.
    """
    program = resolve_argv(argv)[0]
    if shutil.which(program) is None:
        raise InvalidRequestError(f"command '{program}' not found on PATH (needed to run: {' '.join(argv)})")


def check_output_dir(output_dir: str | Path, *, resume: bool) -> Path:
    """Refuse an existing run directory unless resuming, and resuming one that does not exist.

    Raises:
        InvalidRequestError: one line naming the directory and the fix.
    """
    out = Path(output_dir)
    if out.exists() and not resume:
        raise InvalidRequestError(
            f"output directory {out} already exists; choose a new --output-dir, "
            "or add --resume to continue the run in it"
        )
    if resume and not out.is_dir():
        raise InvalidRequestError(
            f"--resume: output directory {out} does not exist (nothing to resume; drop --resume to start)"
        )
    return out


def prepare_output_dir(spec: LaunchSpec, output_dir: str | Path, *, resume: bool) -> list[Path]:
    """Create the run directory (or check it, when resuming) and write the spec's files into it.

    Every file is checked before any is written, so a refusal leaves the disk as it was.

    Returns:
        The files written (on resume, those that were missing).

    Raises:
        InvalidRequestError: the directory exists and ``resume`` is false; ``resume`` without the
            directory; on resume, an existing file whose content differs from the one to write.
    """
    out = check_output_dir(output_dir, resume=resume)
    missing: list[tuple[Path, str]] = []
    for relative, content in spec.files.items():
        path = out / relative
        if not path.exists():
            missing.append((path, content))
        elif not _same_content(relative, path, content):
            raise InvalidRequestError(
                f"--resume: {path} differs from what this launch would write (a resumed run keeps its plan "
                f"and configs): launch {out / PLAN_FILE} with the same options, or use a new --output-dir"
            )
    if not resume:
        try:
            out.mkdir(parents=True)
        except FileExistsError:
            raise InvalidRequestError(f"output directory {out} already exists; choose a new --output-dir") from None
        except OSError as error:
            raise ConfigError(f"cannot create output directory {out}: {error}") from None
    for path, content in missing:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, content, what="launch file")
    return [path for path, _ in missing]


def run_command(argv: Sequence[str], env: dict[str, str]) -> int:
    """Run ``argv`` (resolved by :func:`resolve_argv`) with ``env`` added; return its exit code.

    The child gets its own session, and SIGINT / SIGTERM / SIGHUP received by this process are sent
    once to the child's whole process group (as a terminal's Ctrl-C would reach ``torchrun`` and its
    workers), so the training core can checkpoint and exit. If this process dies without a chance to
    forward (SIGKILL, a crash), the kernel sends the child SIGTERM (:func:`parent_death_hook`): the run
    never outlives its launcher unless detached (:func:`run_detached`). A child killed by signal N
    returns 128 + N, and so does a run stopped by a forwarded signal N (:func:`exit_code`).

    Raises:
        InvalidRequestError: the program cannot be started.
    """
    started: list[subprocess.Popen[bytes]] = []
    pending: list[int] = []
    forwarded: list[int] = []

    def forward(signum: int, _frame: FrameType | None) -> None:
        forwarded.append(signum)
        if not started:  # arrived before the child exists: deliver it right after the start
            pending.append(signum)
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(started[0].pid, signum)

    previous: dict[int, Any] = {}
    try:
        for signum in _FORWARDED_SIGNALS:
            previous[signum] = signal.signal(signum, forward)
    except ValueError:  # not the main thread: signals cannot be caught here; the child still runs
        pass
    try:
        try:
            child = subprocess.Popen(
                resolve_argv(argv),
                env={**os.environ, **env},
                start_new_session=True,
                preexec_fn=parent_death_hook(),
            )
        except OSError as error:
            raise InvalidRequestError(f"cannot start '{argv[0]}': {error}") from None
        started.append(child)
        for waiting in pending:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, waiting)
        code = child.wait()
    finally:
        for restored, handler in previous.items():
            signal.signal(restored, handler)
    if forwarded and code == -forwarded[0]:  # killed by it: the run had no handler yet, so it said nothing
        print(
            f"error: stopped by {signal.Signals(forwarded[0]).name} while the run was starting (before training: "
            "no checkpoint was written); run the same command again to start it",
            file=sys.stderr,
            flush=True,
        )
    return exit_code(code, forwarded[0] if forwarded else None)


def exit_code(child_code: int, forwarded: int | None) -> int:
    """The launch's exit code: the child's (128 + N when killed by signal N), or 128 + N for a forwarded signal N.

    When this process forwarded signal N and the child ended with 0 or 1 — what torchrun / accelerate return when their
    workers stopped on it (the training core itself returns 128 + N) — the code is 128 + N, so that an interrupted run
    (checkpoint saved) is told apart from a completed one by the shell convention. Any other code (a refusal, 2) is
    kept.
    """
    code = 128 - child_code if child_code < 0 else child_code
    if forwarded is not None and code in (0, 1):
        return 128 + forwarded
    return code


def run_detached(argv: Sequence[str], env: dict[str, str], log_path: Path) -> int:
    """Start ``argv`` in its own session, output to ``log_path``, and return its pid without waiting.

    The run survives the launcher, a closed terminal and SIGHUP (new session, stdin from /dev/null).

    Raises:
        InvalidRequestError: the program cannot be started.
    """
    try:
        with log_path.open("ab") as log:
            child = subprocess.Popen(
                resolve_argv(argv),
                env={**os.environ, **env},
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
    except OSError as error:
        raise InvalidRequestError(f"cannot start '{argv[0]}': {error}") from None
    return child.pid


def run_launch(spec: LaunchSpec, output_dir: str | Path, *, resume: bool, dry_run: bool, detach: bool = False) -> int:
    """Write the spec's files and run its command (nothing at all with ``dry_run``); return the exit code.

    A directory whose run lock is held by a live run (:mod:`autotune.run_lock`) is refused before
    anything is written. With ``detach`` the run is started in the background (its output in
    ``OUT/launch.log``) and 0 is returned at once.

    Raises:
        InvalidRequestError: see :func:`check_command`, :func:`prepare_output_dir`, :func:`run_command`,
            and a run directory in use.
    """
    if dry_run:
        return 0
    check_command(spec.argv)
    run_lock.probe(output_dir)
    prepare_output_dir(spec, output_dir, resume=resume)
    if detach:
        log_path = Path(output_dir) / DETACHED_LOG_FILE
        pid = run_detached(spec.argv, spec.env, log_path)
        print(f"detached: pid {pid}, output in {log_path} (stop it with: kill -TERM {pid})", flush=True)
        return 0
    return run_command(spec.argv, spec.env)


def differing_files(spec: LaunchSpec, output_dir: str | Path) -> list[Path]:
    """The files of ``spec`` that exist in ``output_dir`` with other content (``plan.yaml`` compared as a plan)."""
    out = Path(output_dir)
    return [
        out / relative
        for relative, content in spec.files.items()
        if (out / relative).exists() and not _same_content(relative, out / relative, content)
    ]


def _same_content(relative: str, path: Path, content: str) -> bool:
    try:
        existing = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    if existing == content:
        return True
    if relative != PLAN_FILE:
        return False
    try:
        return plan_from_yaml(existing, str(path)) == plan_from_yaml(content, relative)
    except AutotuneError:
        return False
