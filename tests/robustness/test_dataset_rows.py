"""Dataset rows of the wrong type, all-empty texts and unreadable bytes are refused with one line naming the row."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from autotune.errors import ConfigError
from autotune.schemas.dataset_rows import check_dataset_file
from autotune.trainer.data_checks import check_rows

GOOD = {
    "instruction": {"instruction": "say hi", "input": "", "output": "hi"},
    "text": {"text": "red green blue"},
    "chat": {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]},
}

BAD_ROWS = [
    ("instruction", {"instruction": "x", "output": 5}, "'output' must be a string"),
    ("instruction", {"instruction": ["x"], "output": "y"}, "'instruction' must be a string"),
    ("instruction", {"instruction": "x", "output": None}, "'output' must be a string"),
    ("instruction", {"instruction": "x", "output": "y", "input": 3}, "'input' must be a string"),
    ("instruction", {"instruction": {"a": 1}, "output": "y"}, "'instruction' must be a string"),
    ("text", {"text": 12}, "'text' must be a string"),
    ("text", {"text": ["a", "b"]}, "'text' must be a string"),
    ("text", {"text": None}, "'text' must be a string"),
    ("chat", {"messages": "hello"}, "'messages' must be a non-empty list"),
    ("chat", {"messages": []}, "'messages' must be a non-empty list"),
    ("chat", {"messages": ["hello"]}, "each message must be"),
    ("chat", {"messages": [{"role": "user"}]}, "'messages.content' must be a string"),
    ("chat", {"messages": [{"role": 1, "content": "x"}]}, "'messages.role' must be a string"),
    ("chat", {"messages": [{"role": "assistant", "content": {"x": 1}}]}, "'messages.content' must be a string"),
]


@pytest.mark.parametrize("fmt,row,message", BAD_ROWS)
def test_wrong_typed_row_refused_naming_it(fmt: str, row: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        check_rows([GOOD[fmt], GOOD[fmt], row], fmt, "data.jsonl")
    assert "row 3" in str(caught.value) and message in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    "fmt,empty",
    [
        ("text", {"text": ""}),
        ("text", {"text": "   \n"}),
        ("instruction", {"instruction": "x", "output": ""}),
        ("chat", {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": ""}]}),
        ("chat", {"messages": [{"role": "user", "content": "hi"}]}),
    ],
)
def test_all_empty_dataset_refused(fmt: str, empty: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match="nothing to learn"):
        check_rows([empty] * 5, fmt, "data.jsonl")


def test_some_empty_rows_warn(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="autotune.trainer"):
        check_rows([GOOD["text"], {"text": ""}], "text", "data.jsonl")
    assert "1 of 2 rows" in caplog.text


def test_no_rows_refused() -> None:
    with pytest.raises(ConfigError, match="no rows"):
        check_rows([], "text", "data.jsonl")


@pytest.mark.parametrize("fmt", list(GOOD))
def test_good_rows_accepted(fmt: str) -> None:
    check_rows([GOOD[fmt]] * 3, fmt, "data.jsonl")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"text": "ok"}\n{"text": "\xff\xfe bad"}\n', "line 2: invalid UTF-8 (byte 10)"),
        (b'{"text": "ok"}\n{"text": 1}\n{"text": [1]}\n', "line 2: 'text' must be a string, got int"),
        (b'{"text": "ok"}\n{not json\n', "line 2: not valid JSON (Expecting property name"),
        (b'{"text": "ok"}\n\n\n{"text": "a"\n', "line 4: not valid JSON"),
        (b"\x00\x00\x00\x00", "line 1: not valid JSON"),
        (b'{"text": "ok"}\n[1, 2]\n', "line 2: is not a JSON object"),
        (b"\n\n", "has no rows"),
        (b'{"text": " "}\n{"text": ""}\n', "every one of its 2 rows has nothing to learn"),
    ],
    ids=["invalid-utf8", "mixed-types", "broken-json", "blank-lines-counted", "binary", "array", "empty", "blank"],
)
def test_dataset_file_is_checked_streamed_naming_the_line(tmp_path: Path, content: bytes, message: str) -> None:
    """The whole file is read line by line before any library sees it; the error names the file's line."""
    file = tmp_path / "data.jsonl"
    file.write_bytes(content)
    with pytest.raises(ConfigError) as caught:
        check_dataset_file(file, "auto")
    assert message in str(caught.value) and "\n" not in str(caught.value)
    assert str(file) in str(caught.value)


def test_json_array_and_txt_files_are_checked(tmp_path: Path) -> None:
    array = tmp_path / "data.json"
    array.write_text('[{"instruction": "a", "output": "b"}, {"instruction": "a", "output": 3}]')
    with pytest.raises(ConfigError, match="record 2: 'output' must be a string"):
        check_dataset_file(array, "auto")
    broken = tmp_path / "broken.json"
    broken.write_text('[\n{"text": "a"},\n{"text": }\n]')
    with pytest.raises(ConfigError, match="line 3: not valid JSON"):
        check_dataset_file(broken, "auto")
    text = tmp_path / "data.txt"
    text.write_bytes(b"hello\n\xc3\x28\n")
    with pytest.raises(ConfigError, match="line 2: invalid UTF-8"):
        check_dataset_file(text, "auto")
    text.write_text("hello\n\nworld\n")
    summary = check_dataset_file(text, "auto")
    assert summary is not None and (summary.fmt, summary.rows, summary.empty_rows) == ("text", 3, 1)


def test_the_training_core_checks_a_local_file_before_loading_it(tmp_path: Path) -> None:
    from autotune.trainer.data_checks import check_local_file

    file = tmp_path / "data.jsonl"
    file.write_text('{"text": "ok"}\n{"text": "ok"\n')
    with pytest.raises(ConfigError, match="line 2: not valid JSON"):
        check_local_file(str(file), "auto")
    assert check_local_file("org/hub-dataset", "auto") is False
