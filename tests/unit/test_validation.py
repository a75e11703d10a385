"""The one validation-error formatter: one line, keys as dotted paths or CLI flags."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from autotune.launcher.options import LaunchOptions
from autotune.schemas.plan import PlanFile
from autotune.schemas.setting import TrainingSetting
from autotune.validation import format_validation_error


def _error(model: type, data: dict) -> ValidationError:  # type: ignore[type-arg]
    with pytest.raises(ValidationError) as caught:
        model.model_validate(data)
    return caught.value


def test_unknown_key_names_the_closest_valid_one() -> None:
    line = format_validation_error(_error(TrainingSetting, {"micro_batch_sise": 2}), TrainingSetting)
    assert "unknown key 'micro_batch_sise' (did you mean 'micro_batch_size'?" in line
    assert "\n" not in line


def test_nested_keys_are_dotted_paths_and_at_most_three_problems_are_spelled_out() -> None:
    line = format_validation_error(_error(PlanFile, {"setting": {"grad_accum": 0}}), PlanFile)
    assert line.startswith("missing key 'autotune_version'; ") and line.endswith(" more")
    nested = format_validation_error(_error(TrainingSetting, {"grad_accum": 0}), TrainingSetting)
    assert "grad_accum: Input should be greater than or equal to 1 (got 0)" in nested
    unknown = format_validation_error(_error(PlanFile, {"setting": {"nope": 1}}), PlanFile)
    assert "unknown key 'setting.nope' (valid keys: method, " in unknown


def test_cli_flags_replace_field_names() -> None:
    error = _error(LaunchOptions, {"dataset": "d", "output_dir": "o", "max_steps": 0})
    assert format_validation_error(error, LaunchOptions, flags=True).startswith("--max-steps: ")
    named = format_validation_error(error, LaunchOptions, flags={"max_steps": "--steps"})
    assert named.startswith("--steps: ")


def test_a_whole_object_error_does_not_echo_the_input() -> None:
    line = format_validation_error(_error(TrainingSetting, {"method": "qlora", "precision": "fp32"}))
    assert "(got {" not in line and line
