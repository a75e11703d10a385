"""The plan agrees with what is trained (``trainer/consistency.py``), in-process on configs and manifests.

Complements tests/robustness/test_checkpoints.py (an edited plan refused on resume, a 4096 vs 64 model): here every
architecture field is compared on its own, a field the config lacks is not compared, and a checkpoint whose manifest
records no plan (an older autotune) resumes.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from plans import make_plan

from autotune.errors import ConfigError
from autotune.trainer.checkpoints import MANIFEST, write_manifest
from autotune.trainer.consistency import ARCHITECTURE_FIELDS, check_model_matches_plan, check_resume_plan

PLAN = make_plan()


def _config(**changes: int) -> SimpleNamespace:
    return SimpleNamespace(**{name: getattr(PLAN.model, name) for name in ARCHITECTURE_FIELDS} | changes)


@pytest.mark.parametrize("field", ARCHITECTURE_FIELDS)
def test_each_architecture_field_that_differs_is_named_planned_then_loaded(field: str) -> None:
    planned = getattr(PLAN.model, field)
    with pytest.raises(ConfigError) as error:
        check_model_matches_plan(_config(**{field: planned + 2}), PLAN)
    assert f"{field} {planned} planned, {planned + 2} loaded" in str(error.value)
    assert f"autotune plan {PLAN.model_source}" in str(error.value) and "\n" not in str(error.value)


def test_every_difference_is_listed_in_one_line() -> None:
    with pytest.raises(ConfigError, match="hidden_size 4096 planned, 64 loaded; vocab_size 128256 planned, 99 loaded"):
        check_model_matches_plan(_config(hidden_size=64, vocab_size=99), PLAN)


def test_a_field_the_config_lacks_is_not_compared_and_a_multimodal_config_is_read_from_its_text_part() -> None:
    partial = _config()
    del partial.vocab_size
    check_model_matches_plan(partial, PLAN)
    wrapper = SimpleNamespace(text_config=_config(), hidden_size=1)  # the outer config is not the text model's
    check_model_matches_plan(wrapper, PLAN)
    with pytest.raises(ConfigError, match="num_hidden_layers"):
        check_model_matches_plan(SimpleNamespace(text_config=_config(num_hidden_layers=2)), PLAN)


def test_a_checkpoint_with_the_same_plan_resumes_and_an_edited_one_is_refused(tmp_path: Path) -> None:
    checkpoint = tmp_path / "checkpoint-4"
    checkpoint.mkdir()
    write_manifest(checkpoint, 4, PLAN)
    check_resume_plan(checkpoint, PLAN)
    edited = PLAN.model_copy(update={"setting": PLAN.setting.model_copy(update={"micro_batch_size": 1})})
    with pytest.raises(ConfigError, match="micro_batch_size") as error:
        check_resume_plan(checkpoint, edited)
    assert "checkpoint-4" in str(error.value)


def test_a_manifest_without_a_plan_resumes(tmp_path: Path) -> None:
    checkpoint = tmp_path / "checkpoint-4"
    checkpoint.mkdir()
    (checkpoint / MANIFEST).write_text(json.dumps({"step": 4, "files": {}}))
    edited = PLAN.model_copy(update={"setting": PLAN.setting.model_copy(update={"micro_batch_size": 1})})
    check_resume_plan(checkpoint, edited)
