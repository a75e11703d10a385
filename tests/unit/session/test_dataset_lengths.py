"""Where ``--dataset`` takes its tokenizer from (src/autotune/session/dataset_lengths.py ``tokenizer_source``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotune.errors import InvalidRequestError
from autotune.launcher.preflight import TOKENIZER_FILES
from autotune.session.dataset_lengths import tokenizer_source


@pytest.mark.parametrize("name", TOKENIZER_FILES)
def test_a_model_directory_with_a_tokenizer_file_is_its_own_tokenizer(tmp_path: Path, name: str) -> None:
    (tmp_path / "config.json").write_text("{}", encoding="utf-8")
    (tmp_path / name).write_bytes(b"x")
    assert tokenizer_source(str(tmp_path), None) == str(tmp_path)
    assert tokenizer_source(str(tmp_path / "config.json"), None) == str(tmp_path)


def test_a_config_without_a_tokenizer_asks_for_one(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}", encoding="utf-8")
    (tmp_path / "tokenizer_config.json").write_text("{}", encoding="utf-8")  # settings, not a vocabulary
    with pytest.raises(InvalidRequestError, match="pass --tokenizer DIR"):
        tokenizer_source(str(tmp_path / "config.json"), None)
    assert tokenizer_source(str(tmp_path), "org/tok") == "org/tok"
