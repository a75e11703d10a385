"""This machine's GPUs, found without importing torch: ``nvidia-smi -L``, else ``rocm-smi --showproductname``."""

from __future__ import annotations

import re
import shutil
import subprocess

DETECT_TIMEOUT_S = 20.0

_NVIDIA_LINE = re.compile(r"^GPU \d+: (.+?)(?: \(UUID: .*\))?$")
_ROCM_SERIES = re.compile(r"^GPU\[\d+\]\s*:\s*Card [Ss]eries:\s*(.+)$")


def _command_lines(argv: list[str]) -> list[str]:
    """The stdout lines of a command, or [] when it is missing, fails or hangs."""
    if shutil.which(argv[0]) is None:
        return []
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=DETECT_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return []
    return done.stdout.splitlines() if done.returncode == 0 else []


def detect_gpus() -> list[str]:
    """Names of the NVIDIA GPUs (``nvidia-smi -L``) or, failing that, AMD GPUs (``rocm-smi``) of this machine."""
    names = [m.group(1).strip() for line in _command_lines(["nvidia-smi", "-L"]) if (m := _NVIDIA_LINE.match(line))]
    if names:
        return names
    lines = [line.strip() for line in _command_lines(["rocm-smi", "--showproductname"])]
    return [m.group(1).strip() for line in lines if (m := _ROCM_SERIES.match(line))]
