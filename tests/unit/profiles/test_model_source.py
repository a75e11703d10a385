"""A MODEL name → ModelSpec and weights (autotune.profiles.model_source): the catalog, config.json, model
directories, .gguf files, and relative paths from a given folder."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from autotune.errors import ConfigError, UnknownNameError
from autotune.profiles.catalog import resolve_model_profile
from autotune.profiles.model_source import resolve_model_source

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "configs" / "qwen2.5-0.5b"
"""A Qwen2.5 0.5B config.json (tests/fixtures/configs/README.md)."""


def test_catalog_names_give_the_entry_and_the_weights_they_name() -> None:
    source = resolve_model_source("Qwen2.5-7B-Instruct")
    assert source.spec == resolve_model_profile("qwen2.5-7b") and source.path is None
    assert source.weights == "Qwen/Qwen2.5-7B-Instruct"  # the Instruct weights, the base entry's shapes


@pytest.mark.parametrize("name", ["config.json", "."])
def test_a_config_or_its_directory_gives_the_file_shapes_and_the_directory_as_weights(name: str) -> None:
    source = resolve_model_source(name, base_dir=FIXTURE)
    assert source.spec.key == "qwen2.5-0.5b" and source.spec.source == str(FIXTURE / "config.json")
    assert source.weights == str(FIXTURE) and source.path == (FIXTURE / name).resolve()


def test_base_dir_applies_to_relative_paths_only(tmp_path: Path) -> None:
    assert resolve_model_source(str(FIXTURE), base_dir=tmp_path).path == FIXTURE
    with pytest.raises(ConfigError, match=re.escape(str(tmp_path / "config.json"))):
        resolve_model_source("config.json", base_dir=tmp_path)
    with pytest.raises(UnknownNameError, match="unknown model"):
        resolve_model_source("no-such-model-7b", base_dir=FIXTURE)


def test_a_missing_gguf_is_one_line_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"missing\.gguf") as error:
        resolve_model_source("missing.gguf", base_dir=tmp_path)
    assert "\n" not in str(error.value)
