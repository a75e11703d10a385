"""Tokenization (``Dataset.map``), packing and the collator (``DataCollatorForSeq2Seq``) of the training core.

Fast (no training): the tiny word-level tokenizer of the integration tests, datasets built in memory.
"""

from __future__ import annotations

from typing import Any

import pytest
from trainer_helpers import build_tokenizer, instruction_rows, text_rows

from autotune.errors import ConfigError
from autotune.trainer.data import IGNORE_INDEX, build_collator, build_train_dataset, tokenize_instruction


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return build_tokenizer()


def _dataset(rows: list[dict[str, Any]]) -> Any:
    import datasets

    return datasets.Dataset.from_list(rows)


def test_packing_cuts_the_concatenation_into_full_blocks(tokenizer: Any) -> None:
    rows = instruction_rows(20)
    examples = [tokenize_instruction(row, tokenizer) for row in rows]
    ids = [token for e in examples for token in e.input_ids]
    labels = [label for e in examples for label in e.labels]
    seq_len = 16
    built = build_train_dataset(_dataset(rows), tokenizer, "instruction", seq_len, pack=True, name="t")
    expected = [(ids[s : s + seq_len], labels[s : s + seq_len]) for s in range(0, len(ids) - seq_len + 1, seq_len)]
    expected = [(i, lab) for i, lab in expected if any(x != IGNORE_INDEX for x in lab)]
    assert [(row["input_ids"], row["labels"]) for row in built] == expected
    assert all(len(row["input_ids"]) == seq_len for row in built)


def test_a_dataset_shorter_than_a_block_is_one_shorter_block(tokenizer: Any) -> None:
    rows = text_rows(1)
    built = build_train_dataset(_dataset(rows), tokenizer, "text", 4096, pack=True, name="t")
    assert len(built) == 1 and 0 < len(built[0]["input_ids"]) < 4096


def test_truncation_keeps_rows_with_a_learned_token(tokenizer: Any) -> None:
    rows = instruction_rows(6)
    long_prompt = {"instruction": " ".join(["red"] * 40), "input": "", "output": "blue"}
    built = build_train_dataset(_dataset([*rows, long_prompt]), tokenizer, "instruction", 12, pack=False, name="t")
    assert len(built) == len(rows)  # the long prompt's answer is cut off: nothing left to learn
    for row, source in zip(built, rows, strict=True):
        example = tokenize_instruction(source, tokenizer)
        assert row["input_ids"] == example.input_ids[:12] and row["labels"] == example.labels[:12]


def test_nothing_to_learn_is_one_config_error(tokenizer: Any) -> None:
    rows = [{"instruction": " ".join(["red"] * 40), "input": "", "output": "blue"}]
    with pytest.raises(ConfigError, match="no learnable tokens"):
        build_train_dataset(_dataset(rows), tokenizer, "instruction", 8, pack=False, name="t")


def test_the_collator_pads_right_with_masked_labels(tokenizer: Any) -> None:
    import torch

    features = [{"input_ids": [5, 6, 7], "labels": [IGNORE_INDEX, 6, 7]}, {"input_ids": [8], "labels": [8]}]
    batch = build_collator(tokenizer)(features)
    pad = tokenizer.pad_token_id
    assert batch["input_ids"].tolist() == [[5, 6, 7], [8, pad, pad]]
    assert batch["labels"].tolist() == [[IGNORE_INDEX, 6, 7], [8, IGNORE_INDEX, IGNORE_INDEX]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [1, 0, 0]]
    assert batch["input_ids"].dtype == torch.long
    left = build_tokenizer()
    left.padding_side = "left"
    assert build_collator(left)(features)["input_ids"].tolist() == [[5, 6, 7], [8, pad, pad]]
    assert left.padding_side == "left"  # the run's tokenizer is saved as loaded
