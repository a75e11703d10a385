"""autotune.costmodel.calibration: loading a calibration file with retired factors."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from autotune.costmodel.calibration import default_coefficients, load_coefficients
from autotune.errors import ConfigError


def test_a_calibration_with_the_retired_factors_at_one_loads_and_another_value_is_refused(tmp_path: Path) -> None:
    data = default_coefficients().model_dump(mode="json")
    path = tmp_path / "old.yaml"
    path.write_text(yaml.safe_dump({**data, "adapter_time_factor": 1.0, "qlora_time_factor": 1.0}), encoding="utf-8")
    assert load_coefficients(path).lora_target_cpu_s == data["lora_target_cpu_s"]
    path.write_text(yaml.safe_dump({**data, "adapter_time_factor": 1.7}), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"adapter_time_factor 1\.7 is no longer used"):
        load_coefficients(path)
