"""Dataset rows of the wrong type, all-empty texts and unreadable bytes are refused with one line naming the row."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from autotune.errors import ConfigError
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
    "content",
    [
        b'{"text": "ok"}\n{"text": "\xff\xfe bad"}\n',
        b'{"text": "ok"}\n{"text": 1}\n{"text": [1]}\n',
        b'{"text": "ok"}\n{not json\n',
        b"\x00\x00\x00\x00",
    ],
    ids=["invalid-utf8", "mixed-types", "broken-json", "binary"],
)
def test_unreadable_dataset_file_is_one_line(tmp_path: Path, content: bytes) -> None:
    pytest.importorskip("datasets")
    from autotune.trainer.data import load_raw_dataset
    from autotune.trainer.data_checks import check_encoding

    file = tmp_path / "data.jsonl"
    file.write_bytes(content)
    try:
        check_encoding(str(file))
        raw = load_raw_dataset(str(file))
    except ConfigError as error:
        assert "\n" not in str(error) and str(file) in str(error)
        return
    with pytest.raises(ConfigError):
        check_rows(raw, "text", str(file))


def test_invalid_utf8_names_the_line(tmp_path: Path) -> None:
    from autotune.trainer.data_checks import check_encoding

    file = tmp_path / "data.jsonl"
    file.write_bytes(b'{"text": "ok"}\n{"text": "ok"}\n{"text": "\xc3\x28"}\n')
    with pytest.raises(ConfigError, match="line 3: invalid UTF-8"):
        check_encoding(str(file))
