"""Calibration coefficients: loading the shipped fit, user calibration files, and error bands.

The shipped coefficients live in ``profiles/calibration/seeds.yaml`` and are produced by
``python benchmarks/calibrate_seeds.py`` (the fit: ``autotune.calibration.fit``) from the transcribed seed tables.
"""

from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path

from autotune.fileio import write_atomic
from autotune.profiles.shipped_cache import load_shipped_yaml
from autotune.schemas.calibration import CostCoefficients

SHIPPED_CALIBRATION = "seeds"


def load_coefficients(path: str | Path) -> CostCoefficients:
    """Read a calibration YAML written by ``autotune calibrate``.

    Raises:
        ConfigError: missing file, invalid YAML, unknown keys or bad values (one line naming the file).
    """
    from autotune import yamlio  # PyYAML is imported only when a YAML file is read

    return yamlio.load_validated(path, CostCoefficients, "calibration file")


@functools.lru_cache(maxsize=1)
def default_coefficients() -> CostCoefficients:
    """The shipped seed-table calibration, or the physics priors if no fit has been shipped."""
    resource = resources.files("autotune.profiles").joinpath("calibration", f"{SHIPPED_CALIBRATION}.yaml")
    if not resource.is_file():
        return CostCoefficients()
    data = load_shipped_yaml("calibration", f"{SHIPPED_CALIBRATION}.yaml", resource.read_text(encoding="utf-8"))
    return CostCoefficients.model_validate(data)


def save_coefficients(coefficients: CostCoefficients, path: str | Path, overwrite: bool = False) -> None:
    """Write a calibration YAML (refuses to overwrite an existing file unless ``overwrite``).

    Written atomically (:func:`autotune.fileio.write_atomic`): a full disk leaves no empty file.

    Raises:
        InvalidRequestError: the file exists and ``overwrite`` is False.
        ConfigError: it cannot be written (the message says what was kept).
    """
    import yaml

    file = Path(path)
    file.parent.mkdir(parents=True, exist_ok=True)
    text = yaml.safe_dump(coefficients.model_dump(mode="json"), sort_keys=False)
    write_atomic(file, text, overwrite=overwrite, what="calibration")


def error_band(bands: dict[str, float], family: str) -> float:
    """Relative ± band for a family ('lora', 'full-fsdp-offload', ...), else its method's, else 'default'."""
    if family in bands:
        return bands[family]
    method = family.split("-")[0]
    return bands.get(method, bands.get("default", 0.0))
