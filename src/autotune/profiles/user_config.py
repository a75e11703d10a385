"""The user's autotune config directory and the calibration file kept in it.

Where it is, first match wins:
  1. ``$AUTOTUNE_CONFIG_DIR`` (tests and CI point it at a temporary directory);
  2. ``$XDG_CONFIG_HOME/autotune`` when ``XDG_CONFIG_HOME`` is set to an absolute path (the XDG Base
     Directory Specification ignores relative values);
  3. ``~/.config/autotune`` (the specification's default for ``XDG_CONFIG_HOME``).

``autotune calibrate`` writes ``calibration.yaml`` there by default, and ``plan`` / ``estimate`` /
``validate`` use that file when it exists (``--calibration FILE`` still wins; without the file the
shipped calibration is used).
"""

from __future__ import annotations

import os
from pathlib import Path

CONFIG_DIR_ENV = "AUTOTUNE_CONFIG_DIR"
USER_CALIBRATION_FILE = "calibration.yaml"


def user_dir(override_env: str, xdg_env: str, home_default: str) -> Path:
    """An autotune directory of the user's, by the XDG Base Directory rule; it need not exist.

    ``$override_env`` when set, else ``$xdg_env/autotune`` when that is an absolute path (the specification ignores
    relative values), else ``~/home_default/autotune``.
    """
    override = os.environ.get(override_env)
    if override:
        return Path(override).expanduser()
    xdg = os.environ.get(xdg_env)
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / "autotune"
    return Path.home() / home_default / "autotune"


def config_dir() -> Path:
    """The user config directory (see the module docstring); it need not exist."""
    return user_dir(CONFIG_DIR_ENV, "XDG_CONFIG_HOME", ".config")


def user_calibration_path() -> Path:
    """Where ``autotune calibrate`` writes by default: ``config_dir() / calibration.yaml``."""
    return config_dir() / USER_CALIBRATION_FILE


def find_user_calibration() -> Path | None:
    """The user calibration file if it exists, else None."""
    path = user_calibration_path()
    return path if path.is_file() else None
