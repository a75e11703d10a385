"""Tokens seen, padding left out, for packed batches (``trainer/token_count.py``), over a stand-in Trainer.

The contract: with the core's packed collator and ``include_num_input_tokens_seen="non_padding"`` each micro batch
adds its real tokens (:meth:`PackedCollator.real_tokens`), summed over ranks by the accelerator's gather; every other
case is the Trainer's own count.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("transformers")

import torch

from autotune.trainer.packed import PackedCollator
from autotune.trainer.token_count import RealTokenCountMixin

EOS = 2


class StandInTrainer:
    """The Trainer's own count (here: every non-pad ``input_ids``), state, arguments and accelerator."""

    def __init__(self, collator: Any, mode: str = "non_padding", ranks: int = 1) -> None:
        self.data_collator = collator
        self.args = SimpleNamespace(include_num_input_tokens_seen=mode, device=torch.device("cpu"))
        self.state = SimpleNamespace(num_input_tokens_seen=0)
        self.accelerator = SimpleNamespace(gather=lambda t: t.reshape(1).repeat(ranks))  # each rank the same count
        self.own_counts = 0

    def _track_num_input_tokens(self, inputs: dict[str, torch.Tensor]) -> None:
        self.own_counts += 1
        self.state.num_input_tokens_seen += int((inputs["input_ids"] != EOS).sum())


class Counting(RealTokenCountMixin, StandInTrainer):
    pass


def _packed_batch(collator: PackedCollator) -> dict[str, torch.Tensor]:
    """Two blocks: 3 tokens ending with a learned eos, and 5; the first row padded with 2 eos tokens."""
    blocks = [[5, 6, EOS], [7, EOS, 8, 9, EOS]]
    features = [{"input_ids": b, "labels": b, "position_ids": list(range(len(b)))} for b in blocks]
    return collator(features)


def test_a_packed_batch_counts_its_real_tokens_each_eos_included_summed_over_ranks() -> None:
    collator = PackedCollator("row-per-block", pad_token_id=EOS)
    trainer = Counting(collator, ranks=2)
    batch = _packed_batch(collator)
    trainer._track_num_input_tokens(batch)
    trainer._track_num_input_tokens(batch)
    assert trainer.state.num_input_tokens_seen == 2 * 2 * 8  # two micro batches, two ranks, 3 + 5 real tokens
    assert trainer.own_counts == 0


@pytest.mark.parametrize("case", ["padded-collator", "counting-off"])
def test_other_cases_keep_the_trainers_own_count(case: str) -> None:
    packed = PackedCollator("row-per-block", pad_token_id=EOS)
    trainer = Counting(object(), "non_padding") if case == "padded-collator" else Counting(packed, "all")
    trainer._track_num_input_tokens(_packed_batch(packed))
    assert trainer.own_counts == 1
    assert trainer.state.num_input_tokens_seen == 5  # the stand-in's count: the eos tokens dropped
