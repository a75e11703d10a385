"""Helpers shared by command modules: calibration loading and plan writing."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from autotune.costmodel.calibration import SHIPPED_CALIBRATION, default_coefficients, load_coefficients
from autotune.profiles.user_config import find_user_calibration
from autotune.schemas.calibration import CostCoefficients

_notes = Console(stderr=True, highlight=False, soft_wrap=True)


def coefficients_from_option(path: Path | None) -> tuple[CostCoefficients, str]:
    """The calibration to use: ``--calibration FILE``, else the user's calibration, else the shipped fit.

    The user's calibration is ``calibration.yaml`` in the user config dir (see
    :mod:`autotune.profiles.user_config`); when it is used, a one-line note on stderr says so (stderr keeps
    ``--json`` output clean).

    Raises:
        ConfigError: the chosen file is missing or invalid (one line naming it).
    """
    if path is None:
        user_file = find_user_calibration()
        if user_file is None:
            return default_coefficients(), SHIPPED_CALIBRATION
        path = user_file
        coefficients = load_coefficients(path)
        _notes.print(
            f"[yellow]note:[/] using calibration '{coefficients.name}' from {path} "
            "(--calibration FILE to choose another)",
            highlight=False,
        )
        return coefficients, coefficients.name
    coefficients = load_coefficients(path)
    return coefficients, coefficients.name
