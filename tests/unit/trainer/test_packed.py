"""Packed blocks and their collator (``trainer/packed.py``), in-process on tiny lists and tensors.

The contract: every example lands whole in one block of at most ``seq_len`` tokens, its ``position_ids`` restart at 0,
:func:`split_block` recovers the examples, and the collator keeps each example's first label out of the loss, pads
``row-per-block`` rows with the pad token, label -100 and positions that continue the block, and counts the real
tokens without the padding.
"""

from __future__ import annotations

import random

import pytest

pytest.importorskip("transformers")

import torch

from autotune.trainer.packed import IGNORE_INDEX, PackedCollator, pack_examples, split_block

PAD = 0


def _examples(count: int, seq_len: int, seed: int) -> tuple[list[list[int]], list[list[int]]]:
    """``count`` examples of 1..seq_len distinct tokens (ids tell the examples apart), the first two labels masked."""
    rng = random.Random(seed)
    ids, labels, next_id = [], [], 1
    for _ in range(count):
        length = rng.randint(1, seq_len)
        tokens = list(range(next_id, next_id + length))
        next_id += length
        ids.append(tokens)
        labels.append([IGNORE_INDEX] * min(2, length) + tokens[2:])
    return ids, labels


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_example_is_whole_in_exactly_one_block_of_at_most_seq_len(seed: int) -> None:
    seq_len = 16
    ids, labels = _examples(40, seq_len, seed)
    blocks = pack_examples(ids, labels, seq_len)
    recovered = []
    for block_ids, block_labels, positions in zip(blocks.input_ids, blocks.labels, blocks.position_ids, strict=True):
        assert len(block_ids) == len(block_labels) == len(positions) <= seq_len
        examples = split_block({"input_ids": block_ids, "labels": block_labels, "position_ids": positions})
        recovered += [(tuple(e["input_ids"]), tuple(e["labels"])) for e in examples]
    assert sorted(recovered) == sorted((tuple(i), tuple(lab)) for i, lab in zip(ids, labels, strict=True))
    total = sum(len(example) for example in ids)
    assert blocks.efficiency == pytest.approx(total / (len(blocks.input_ids) * seq_len))
    assert len(blocks.input_ids) >= -(-total // seq_len)  # no fewer blocks than the tokens need


def test_positions_restart_at_zero_for_each_example_and_count_up_inside_it() -> None:
    blocks = pack_examples([[5, 6, 7], [8, 9]], [[-100, 6, 7], [-100, 9]], seq_len=8)
    assert blocks.input_ids == [[5, 6, 7, 8, 9]]
    assert blocks.position_ids == [[0, 1, 2, 0, 1]]
    assert blocks.labels == [[-100, 6, 7, -100, 9]]


@pytest.mark.parametrize("lengths", [[3, 9], [0, 2]])
def test_an_example_longer_than_seq_len_or_empty_is_refused(lengths: list[int]) -> None:
    ids = [list(range(1, n + 1)) for n in lengths]
    with pytest.raises(ValueError):
        pack_examples(ids, ids, seq_len=8)


def _block(*examples: list[int]) -> dict[str, list[int]]:
    """A block row of ``examples`` (every label learned, as the collator's input holds them)."""
    return {
        "input_ids": [t for e in examples for t in e],
        "labels": [t for e in examples for t in e],
        "position_ids": [p for e in examples for p in range(len(e))],
    }


def test_flattened_is_one_row_of_every_example_with_each_first_label_masked() -> None:
    collator = PackedCollator("flattened", pad_token_id=PAD)
    batch = collator([_block([1, 2, 3], [4, 5]), _block([6, 7, 8, 9])])
    assert set(batch) >= {"input_ids", "labels", "position_ids"} and "attention_mask" not in batch
    assert batch["input_ids"].tolist() == [[1, 2, 3, 4, 5, 6, 7, 8, 9]]
    assert batch["position_ids"].tolist() == [[0, 1, 2, 0, 1, 0, 1, 2, 3]]
    assert batch["labels"].tolist() == [[-100, 2, 3, -100, 5, -100, 7, 8, 9]]
    assert all(tensor.dtype == torch.int64 for tensor in batch.values())
    assert int(collator.real_tokens(batch)) == 9


def test_row_per_block_pads_with_the_pad_token_masked_labels_and_continuing_positions() -> None:
    collator = PackedCollator("row-per-block", pad_token_id=PAD)
    batch = collator([_block([1, 2], [3]), _block([4, 5, 6, 7, 8])])
    assert batch["input_ids"].tolist() == [[1, 2, 3, PAD, PAD], [4, 5, 6, 7, 8]]
    assert batch["labels"].tolist() == [[-100, 2, -100, -100, -100], [-100, 5, 6, 7, 8]]
    assert batch["position_ids"].tolist() == [[0, 1, 0, 1, 2], [0, 1, 2, 3, 4]]  # the padding continues example 2
    assert "attention_mask" not in batch and all(t.dtype == torch.int64 for t in batch.values())
    assert int(collator.real_tokens(batch)) == 8


def test_real_tokens_keep_a_learned_eos_that_is_the_pad_token() -> None:
    """The pad token is the eos: each example's learned eos counts; the collator's padding does not."""
    eos = 2
    collator = PackedCollator("row-per-block", pad_token_id=eos)
    batch = collator([_block([5, 6, eos]), _block([7, eos], [8, 9, 10, eos])])
    assert batch["input_ids"][0].tolist() == [5, 6, eos, eos, eos, eos]  # 3 real tokens, then 3 of padding
    assert int(collator.real_tokens(batch)) == 3 + 6
    non_pad = int((batch["input_ids"] != eos).sum())
    assert non_pad == 6  # what counting "not the pad token" would have said: every eos lost


def test_real_tokens_leave_out_an_examples_own_unlearned_pad_tail_as_documented() -> None:
    collator = PackedCollator("row-per-block", pad_token_id=PAD)
    block = {"input_ids": [5, 6, PAD], "labels": [5, 6, IGNORE_INDEX], "position_ids": [0, 1, 2]}
    batch = collator([block, _block([7, 8, 9, 10])])
    assert int(collator.real_tokens(batch)) == 2 + 4
