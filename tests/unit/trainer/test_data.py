"""The training data's pure parts (``trainer/data.py``): what each format learns, the example-keep rule, refusals.

In-process on the tiny word-level tokenizer (``trainer_helpers.build_tokenizer``, each word one token). The packing
and collator round trips, and batched against row-by-row tokenization, are tests/integration/test_data.py's (also
in-process); here: the masks of the three formats token by token, the rule that keeps an example only when a label
after its first is learned, and the one-line refusals of files and chat data.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("datasets")

import datasets
from trainer_helpers import build_tokenizer

from autotune.errors import ConfigError
from autotune.trainer.data import (
    IGNORE_INDEX,
    build_train_dataset,
    load_raw_dataset,
    tokenize_chat,
    tokenize_instruction,
    tokenize_text,
)


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return build_tokenizer()


def _learned(tokenizer: Any, ids: list[int], labels: list[int]) -> list[str]:
    assert len(ids) == len(labels)
    assert all(label in (IGNORE_INDEX, token) for token, label in zip(ids, labels, strict=True))  # a label is its token
    return [tokenizer.convert_ids_to_tokens(t) for t, label in zip(ids, labels, strict=True) if label != IGNORE_INDEX]


def test_instruction_learns_the_output_and_eos_and_masks_the_alpaca_prompt(tokenizer: Any) -> None:
    row = {"instruction": "continue from red", "input": "blue", "output": "green pink"}
    example = tokenize_instruction(row, tokenizer)
    tokens = tokenizer.convert_ids_to_tokens(example.input_ids)
    assert tokens[:6] == ["###", "Instruction", ":", "continue", "from", "red"]
    assert tokens[6:10] == ["###", "Input", ":", "blue"]  # a non-empty input gets its own section
    assert _learned(tokenizer, example.input_ids, example.labels) == ["green", "pink", tokenizer.eos_token]
    without_input = tokenize_instruction({**row, "input": ""}, tokenizer)
    assert "Input" not in tokenizer.convert_ids_to_tokens(without_input.input_ids)


def test_text_learns_every_token_and_an_eos(tokenizer: Any) -> None:
    example = tokenize_text({"text": "red blue"}, tokenizer)
    assert _learned(tokenizer, example.input_ids, example.labels) == ["red", "blue", tokenizer.eos_token]


def test_chat_learns_only_the_assistant_turns_not_their_headers(tokenizer: Any) -> None:
    messages = [
        {"role": "system", "content": "you list colours"},
        {"role": "user", "content": "continue from red"},
        {"role": "assistant", "content": "blue green"},
        {"role": "user", "content": "red"},
        {"role": "assistant", "content": "pink"},
    ]
    example = tokenize_chat({"messages": messages}, tokenizer)
    assert _learned(tokenizer, example.input_ids, example.labels) == [
        "blue",
        "green",
        "<|im_end|>",
        "pink",
        "<|im_end|>",
    ]
    assert tokenizer.convert_ids_to_tokens(example.input_ids).count("assistant") == 2  # in the masked headers


def test_chat_data_needs_a_template_and_role_content_messages(tokenizer: Any) -> None:
    with pytest.raises(ConfigError, match=r"every 'messages' entry must be a list of \{role, content\} objects"):
        tokenize_chat({"messages": [{"role": "user"}]}, tokenizer)
    plain = build_tokenizer()
    plain.chat_template = None
    with pytest.raises(ConfigError, match="this tokenizer has none"):
        tokenize_chat({"messages": [{"role": "user", "content": "red"}]}, plain)


def test_an_example_is_kept_only_when_a_label_after_its_first_is_learned(tokenizer: Any) -> None:
    """Text learns every token, but no token predicts an example's first: cut to 1 token, "red" has nothing left to
    learn and is dropped; cut to 2 it learns its eos and is kept, as cut; a longer one is cut to ``seq_len``."""
    raw = datasets.Dataset.from_list([{"text": "red"}, {"text": "blue green pink"}])
    red, blue, green = tokenizer.convert_tokens_to_ids(["red", "blue", "green"])
    built = build_train_dataset(raw, tokenizer, "text", 2, pack=False, name="t")
    assert built["input_ids"] == [[red, tokenizer.eos_token_id], [blue, green]]
    assert built["labels"] == built["input_ids"]
    with pytest.raises(ConfigError, match=r"^dataset t: no learnable tokens after tokenizing as text \(seq_len 1\)$"):
        build_train_dataset(raw, tokenizer, "text", 1, pack=False, name="t")


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("folder", "is a directory"),
        ("data.csv", "unsupported file type '.csv'"),
        ("./missing.jsonl", "not found"),
        ("broken.jsonl", "cannot be read as json"),
    ],
)
def test_a_dataset_that_cannot_be_loaded_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "folder").mkdir()
    (tmp_path / "data.csv").write_text("a,b\n1,2\n")
    (tmp_path / "broken.jsonl").write_text('{"text": "a"}\n{"text": \n')
    with pytest.raises(ConfigError, match=message) as error:
        load_raw_dataset(name)
    assert "\n" not in str(error.value)
