"""Helpers shared by command modules: calibration loading and plan writing."""

from __future__ import annotations

from pathlib import Path

from autotune.costmodel.calibration import SHIPPED_CALIBRATION, default_coefficients, load_coefficients
from autotune.schemas.calibration import CostCoefficients


def coefficients_from_option(path: Path | None) -> tuple[CostCoefficients, str]:
    """The calibration to use: a user file (``--calibration``) or the shipped seed fit."""
    if path is None:
        return default_coefficients(), SHIPPED_CALIBRATION
    coefficients = load_coefficients(path)
    return coefficients, coefficients.name
