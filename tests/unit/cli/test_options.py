"""The shared option help of src/autotune/cli/options.py, as the commands print it."""

from __future__ import annotations

import pytest
from cli_runner import run


@pytest.mark.parametrize("command", ["plan", "estimate", "validate", "sweep"])
def test_calibration_help_names_the_user_file_before_the_shipped_fit(
    capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """Issue 28: the help said "default: the shipped fit" while the user's calibration.yaml is used when present."""
    code, out, _ = run(capsys, command, "--help")
    assert code == 0
    flat = " ".join(out.replace("│", " ").split())
    help_text = flat[flat.index("--calibration") :]
    user, shipped = help_text.find("your calibration.yaml in the user config dir"), help_text.find("the shipped fit")
    assert 0 <= user < shipped
