"""One run per directory: ``OUT/.autotune.lock`` holds the owner's pid and host while a run trains.

The lock is an ``fcntl.flock`` on the file, held for the life of the owning process: the kernel
releases it when the process ends however it ends (``kill -9`` included), so a lock left by a dead
run is stale by construction and the next run takes it over (and says whose it was). The file's
content (``{"pid", "host", "started_at"}``) is only for the message to the user. Where the file
system does not support ``flock`` the content decides: a lock of this host whose pid is not alive
is stale; a lock of another host is respected (the message says how to remove it).

Used by the training core (global rank 0 holds it for the whole run) and by ``autotune launch``,
which probes it before writing anything into a run directory. Standard library only.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from autotune.errors import InvalidRequestError

LOCK_FILE = ".autotune.lock"


@dataclass
class RunLock:
    """A held lock: keep the object (its open file keeps the ``flock``); :meth:`release` to drop it."""

    path: Path
    fd: int | None
    previous_owner: dict[str, Any] | None
    """The stale lock's content that was taken over (None when the directory was free)."""

    def release(self) -> None:
        """Remove the lock file and drop the lock (idempotent)."""
        if self.fd is None:
            return
        with contextlib.suppress(OSError):
            os.unlink(self.path)
        with contextlib.suppress(OSError):
            os.close(self.fd)
        self.fd = None


def acquire(run_dir: str | Path) -> RunLock:
    """Take the run directory's lock (creating the directory if needed).

    Raises:
        InvalidRequestError: another live process holds it (names its pid, host and start time).
    """
    directory = Path(run_dir)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / LOCK_FILE
    for _ in range(5):  # the file may be replaced between open and flock: retry on a new inode
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            held = _try_flock(fd)
            if held is False or (held is None and not _stale_by_content(path)):
                raise InvalidRequestError(_busy_message(directory, _read_owner(path)))
            if not _same_file(fd, path):
                os.close(fd)
                continue
            previous = _read_owner(path) or None
            _write_owner(fd)
            return RunLock(path=path, fd=fd, previous_owner=previous)
        except BaseException:
            with contextlib.suppress(OSError):
                os.close(fd)
            raise
    raise InvalidRequestError(f"cannot lock {path}: it keeps being replaced by another process")


def probe(run_dir: str | Path) -> None:
    """Refuse a run directory whose lock is held by a live run (changes nothing on disk).

    Raises:
        InvalidRequestError: the directory is in use.
    """
    path = Path(run_dir) / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return  # no lock file: free
    try:
        held = _try_flock(fd, shared=True)
        if held is False or (held is None and not _stale_by_content(path)):
            raise InvalidRequestError(_busy_message(Path(run_dir), _read_owner(path)))
    finally:
        os.close(fd)


def describe_owner(owner: dict[str, Any] | None) -> str:
    """'pid 123 on host h (since 2026-…)' for messages."""
    if not owner:
        return "an unknown process"
    return f"pid {owner.get('pid', '?')} on host {owner.get('host', '?')} (since {owner.get('started_at', '?')})"


def _busy_message(directory: Path, owner: dict[str, Any] | None) -> str:
    return (
        f"run directory {directory} is in use by {describe_owner(owner)}: wait for that run to end or stop it "
        f"(if no such process exists, delete {directory / LOCK_FILE})"
    )


def _try_flock(fd: int, *, shared: bool = False) -> bool | None:
    """True: locked; False: held by another process; None: the file system has no flock."""
    import fcntl

    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError as error:
        if error.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
            return None
        raise
    if shared:
        fcntl.flock(fd, fcntl.LOCK_UN)
    return True


def _stale_by_content(path: Path) -> bool:
    """Without flock: stale when the owner is this host's and its pid is not alive."""
    owner = _read_owner(path)
    if not owner or owner.get("host") != socket.gethostname():
        return not owner
    pid = owner.get("pid")
    if not isinstance(pid, int) or pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def _read_owner(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8")[:4096])
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_owner(fd: int) -> None:
    owner = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    data = (json.dumps(owner) + "\n").encode("utf-8")
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)
    with contextlib.suppress(OSError):
        os.fsync(fd)


def _same_file(fd: int, path: Path) -> bool:
    try:
        return os.fstat(fd).st_ino == os.stat(path).st_ino
    except OSError:
        return False
