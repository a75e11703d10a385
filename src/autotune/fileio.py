"""The one way autotune writes a file: atomically (temporary file, fsync, rename), never half-written.

Every file the project writes — plans, run reports, calibrations, launcher configs, sbatch scripts,
plots, checkpoint manifests — goes through :func:`write_atomic`. The content is written to a
temporary file in the destination directory (same file system, so the final step is atomic), flushed
and ``fsync``-ed, then moved into place:

- ``overwrite=False`` (the default): ``os.link`` the temporary file to the destination, which fails
  if the destination exists, even when another process created it a moment ago (the exclusive
  create of ``open(..., "x")``, but of a complete file); where the file system has no hard links,
  an exclusive create reserves the name and a rename fills it;
- ``overwrite=True``: ``os.replace`` (POSIX ``rename``): readers see the old or the new content,
  never a mix.

The directory is ``fsync``-ed after the rename so the new name survives a power loss (POSIX leaves
directory-entry durability to an explicit directory fsync; see the Linux ``fsync(2)`` man page).
On any failure (disk full, permission, interruption) the temporary file is removed and the
destination is exactly what it was before: the error says so. Pure standard library, no torch.
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from pathlib import Path

from autotune.errors import ConfigError, InvalidRequestError

_TEMP_PREFIX = ".autotune-tmp-"
"""Prefix of the temporary files (hidden; a crash can leave one behind: safe to delete)."""


def write_atomic(path: str | Path, content: str | bytes, *, overwrite: bool = False, what: str = "file") -> Path:
    """Write ``content`` to ``path`` atomically and durably; return ``path``.

    Args:
        path: destination; its directory must exist.
        content: text (written as UTF-8) or bytes.
        overwrite: replace an existing file (atomically) instead of refusing it.
        what: what the file is, for error messages (``"plan"``, ``"calibration"``, ...).

    Raises:
        InvalidRequestError: ``path`` exists and ``overwrite`` is false (nothing was written).
        ConfigError: the directory is missing or the write failed (disk full, permissions, ...);
            the message says that ``path`` was left as it was.
    """
    path = Path(path)
    data = content.encode("utf-8") if isinstance(content, str) else content
    directory = path.parent
    if not directory.is_dir():
        raise ConfigError(f"cannot write {what} {path}: directory {directory} does not exist")
    if not overwrite:
        refuse_existing(path)
    kept = "the previous file is unchanged" if path.exists() else "nothing was written"
    temp: str | None = None
    try:
        handle, temp = tempfile.mkstemp(prefix=_TEMP_PREFIX, suffix=".tmp", dir=directory)
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temp, 0o644 & ~_umask())
        if overwrite:
            os.replace(temp, path)
        else:
            _link_exclusive(temp, path)
        temp = None
        fsync_directory(directory)
    except FileExistsError:
        raise InvalidRequestError(
            f"{path} already exists; refusing to overwrite it (choose another path or remove it first)"
        ) from None
    except (OSError, KeyboardInterrupt) as error:
        reason = "interrupted" if isinstance(error, KeyboardInterrupt) else " ".join(str(error).split())
        raise ConfigError(f"cannot write {what} {path} ({reason}); {kept}") from None
    finally:
        if temp is not None:
            with contextlib.suppress(OSError):
                os.unlink(temp)
    return path


def refuse_existing(*paths: str | Path) -> None:
    """Refuse a destination that exists (a file, a directory or a dangling link), the way :func:`write_atomic` does.

    A command calls it on its outputs before it starts work whose result it would write there, so that the refusal
    comes first, not after the work.

    Raises:
        InvalidRequestError: one of ``paths`` exists (nothing was written).
    """
    for path in map(Path, paths):
        if path.exists() or path.is_symlink():
            raise InvalidRequestError(
                f"{path} already exists; refusing to overwrite it (choose another path or remove it first)"
            )


_NO_HARD_LINKS = (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.ENOSYS, errno.EMLINK)


def _link_exclusive(temp: str, path: Path) -> None:
    """Give the complete temporary file the name ``path`` unless that name exists (then FileExistsError).

    ``os.link`` does both at once. On a file system without hard links (FAT, some network and FUSE
    mounts) the name is reserved with an exclusive create, then replaced by the complete file.
    """
    try:
        os.link(temp, path)  # fails with FileExistsError if someone created it meanwhile
    except OSError as error:
        if isinstance(error, FileExistsError) or error.errno not in _NO_HARD_LINKS:
            raise
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        try:
            os.replace(temp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(path)  # our empty placeholder: leave nothing behind
            raise
        return
    os.unlink(temp)


def fsync_directory(directory: str | Path) -> None:
    """``fsync`` a directory so that names created or renamed in it are durable (no-op where unsupported)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


def is_temporary(name: str) -> bool:
    """True for the name of a temporary file left by an interrupted :func:`write_atomic`."""
    return name.startswith(_TEMP_PREFIX)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def give_umask_mode(directory: Path) -> None:
    """Give files created 0600 and folders created 0700 under ``directory`` (itself included) the umask's modes.

    Files get 0644 under umask 022, folders 0755.

    safetensors' ``save_file`` (0.8) writes through a private temporary file and keeps its mode 0600, so adapter and
    model weights were 0600 next to 0644 configs and reports (issue 29 item 7); ``tempfile.mkdtemp`` makes its folder
    0700 (``autotune export`` writes into one, issue 41). Only those modes are changed (the user's own choices stay);
    errors are ignored (a file may be gone, or not ours).
    """
    mask = _umask()
    for path in [directory, *directory.rglob("*")]:
        with contextlib.suppress(OSError):
            if path.is_symlink():
                continue
            mode = path.stat().st_mode & 0o777
            if path.is_file() and mode == 0o600:
                path.chmod(0o666 & ~mask)
            elif path.is_dir() and mode == 0o700:
                path.chmod(0o777 & ~mask)
