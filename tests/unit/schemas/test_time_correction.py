"""The local time correction a calibration file carries: its shapes are checked when the file is read."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from autotune.schemas.calibration import CostCoefficients
from autotune.schemas.time_correction import LocalTimeCorrection, SettingPoint

POINT = SettingPoint(method="lora", sharding="none", log2_seq_len=11, log2_micro_batch=0, log2_params_b=0, log2_gpus=0)


def correction(**changes: object) -> dict[str, object]:
    """A valid one-anchor correction as a calibration file holds it, with ``changes``."""
    values: dict[str, object] = {
        "anchors": [POINT.model_dump()],
        "row_ids": ["a"],
        "weights": [0.5],
        "precision": [[2.0]],
        "local_log_variance": 0.08,
        "noise_log_variance": 0.01,
        "stack_log_variance": 0.0,
    }
    return {**values, **changes}


def test_a_calibration_file_reads_its_correction_back() -> None:
    read = CostCoefficients.model_validate({"local_time_correction": correction()})
    assert read.local_time_correction == LocalTimeCorrection.model_validate(correction())
    assert CostCoefficients().local_time_correction is None  # the shipped fit has none


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"weights": [0.5, 0.1]}, "one entry per anchor"),
        ({"row_ids": []}, "one entry per anchor"),
        ({"precision": [[2.0, 0.0]]}, "square matrix"),
        ({"noise_log_variance": 0.0}, "greater than 0"),
        ({"anchors": []}, "at least 1 item"),
    ],
)
def test_a_correction_of_the_wrong_shape_is_refused(changes: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        LocalTimeCorrection.model_validate(correction(**changes))
