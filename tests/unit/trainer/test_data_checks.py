"""Dataset rows checked before tokenizing (``trainer/data_checks.py``), in-process on rows and tmp files.

Complements tests/robustness/test_dataset_rows.py (each kind of bad row and file): here the core's side of the rule —
a checked local file needs no second pass and warns of its empty rows, a file the streamed check does not read is
left to the loaded rows, the first bad row stops the check there, and a row that cannot be decoded is one line.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from autotune.errors import ConfigError
from autotune.trainer.data_checks import check_local_file, check_rows


def test_a_checked_local_file_needs_no_second_pass_and_warns_of_its_empty_rows(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    file = tmp_path / "d.jsonl"
    file.write_text('{"text": "a b"}\n{"text": ""}\n{"text": "c"}\n')
    with caplog.at_level(logging.WARNING, logger="autotune.trainer"):
        assert check_local_file(str(file), "auto") is True
    assert f"dataset {file}: 1 of 3 rows have nothing to learn" in caplog.text


@pytest.mark.parametrize("name", ["data.parquet", "org/hub-name", "missing.jsonl"])
def test_a_file_the_streamed_check_does_not_read_is_left_to_the_loaded_rows(tmp_path: Path, name: str) -> None:
    if name.endswith(".parquet"):
        (tmp_path / name).write_bytes(b"PAR1")
    assert check_local_file(str(tmp_path / name) if "/" not in name else name, "auto") is False


def _counted(rows: list[Any], read: list[int]) -> Iterator[Any]:
    for row in rows:
        read.append(1)
        yield row


def test_the_first_bad_row_is_named_1_based_and_the_rest_is_not_read() -> None:
    read: list[int] = []
    rows = [{"text": "a"}, {"text": "b"}, {"text": 3}, {"text": "d"}, {"text": 5}]
    with pytest.raises(ConfigError, match=r"^dataset hub/x row 3: 'text' must be a string, got int \(3\)$"):
        check_rows(_counted(rows, read), "text", "hub/x")
    assert len(read) == 3


def test_a_row_that_cannot_be_decoded_is_one_line_naming_it() -> None:
    def rows() -> Iterator[dict[str, str]]:
        yield {"instruction": "i", "output": "o"}
        raise UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte\n" + "x" * 500)

    with pytest.raises(ConfigError) as error:
        check_rows(rows(), "instruction", "hub/x")
    message = str(error.value)
    assert message.startswith("dataset hub/x row 2: cannot be read (") and "\n" not in message
    assert len(message) < 260  # the decoder's text is cut to 200 characters


def test_chat_rows_with_an_assistant_answer_pass_and_without_one_are_refused() -> None:
    answered = {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}
    unanswered = {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": " "}]}
    check_rows([answered, unanswered], "chat", "c")
    with pytest.raises(ConfigError, match="every one of its 2 rows has nothing to learn"):
        check_rows([unanswered, unanswered], "chat", "c")
