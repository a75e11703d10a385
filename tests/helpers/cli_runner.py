"""Run the real ``autotune`` entry point in-process and capture what a user would see."""

from __future__ import annotations

import pytest

from autotune.cli.app import main


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``autotune *args`` → (exit code, stdout, stderr)."""
    code = 0
    try:
        main(list(args))
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err
