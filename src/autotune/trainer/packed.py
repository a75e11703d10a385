"""Packed training blocks: whole examples per block, and the collator that keeps their attention apart.

The bins come from :func:`autotune.schemas.packing.best_fit_decreasing`; a block row holds its examples' tokens
one after the other, with ``position_ids`` restarting at 0 for every example (that is how the collator finds the
boundaries again). The collator hands each example to transformers' ``DataCollatorWithFlattening``, which sets
the label of every example's first token to -100 (no token predicts across a boundary) and emits the restarting
``position_ids`` and no ``attention_mask``; the attention implementation then masks by those positions (see
:data:`autotune.schemas.packing.PACKED_LAYOUTS`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformers import DataCollatorWithFlattening

from autotune.schemas.packing import PackedLayout, best_fit_decreasing, packing_efficiency

IGNORE_INDEX = -100
"""Label of a token that is not learned (PyTorch cross_entropy's default ignore_index)."""


@dataclass(frozen=True)
class PackedBlocks:
    """Blocks of whole examples: token ids, labels and per-example ``position_ids`` (each list one block)."""

    input_ids: list[list[int]]
    labels: list[list[int]]
    position_ids: list[list[int]]
    efficiency: float
    """Real tokens / (blocks × seq_len), in 0..1."""


def pack_examples(input_ids: Sequence[list[int]], labels: Sequence[list[int]], seq_len: int) -> PackedBlocks:
    """Pack examples (each already at most ``seq_len`` tokens, at least 1) whole into blocks of at most ``seq_len``.

    Args:
        input_ids: token ids per example.
        labels: labels per example, the same lengths (-100 where not learned).
        seq_len: tokens per block.

    Raises:
        ValueError: an example is empty or longer than ``seq_len`` (:func:`best_fit_decreasing`).
    """
    lengths = [len(ids) for ids in input_ids]
    bins = best_fit_decreasing(lengths, seq_len)
    return PackedBlocks(
        input_ids=[[token for i in members for token in input_ids[i]] for members in bins],
        labels=[[label for i in members for label in labels[i]] for members in bins],
        position_ids=[[position for i in members for position in range(lengths[i])] for members in bins],
        efficiency=packing_efficiency(lengths, bins, seq_len),
    )


def split_block(feature: dict[str, Any]) -> list[dict[str, list[int]]]:
    """The examples of one block row: ``input_ids`` / ``labels`` cut where ``position_ids`` restart at 0."""
    starts = [k for k, position in enumerate(feature["position_ids"]) if position == 0]
    ends = [*starts[1:], len(feature["position_ids"])]
    return [
        {"input_ids": list(feature["input_ids"][a:b]), "labels": list(feature["labels"][a:b])}
        for a, b in zip(starts, ends, strict=True)
    ]


class PackedCollator:
    """Collate block rows into a padding-free packed micro batch whose attention stays inside each example.

    ``flattened``: all examples of the micro batch in one row, tensors of shape (1, Σ tokens) — transformers'
    ``DataCollatorWithFlattening`` as is. ``row-per-block``: one row per block, each flattened the same way and
    padded on the right to the longest block with ``pad_token_id``, label -100 and ``position_ids`` that continue the
    block's last example (causal: no real token attends to the padding after it, and no padding token is learned);
    shape (b, longest block). Every tensor is int64, and there is no ``attention_mask`` (the masking reads
    ``position_ids``).

    Why the padding continues rather than restarts: transformers builds a block-diagonal mask only when some row has
    a restart (``masking_utils.find_packed_sequence_indices``). A micro batch whose blocks each hold one example
    then has none, so sdpa runs causal without a mask (its flash backend); a restart in the padding made a mask for
    every such batch and cost 45 % of tokens/s on an H200 (docs/usage.md, "Packing"; benchmarks/gpu_sweep.py).
    """

    def __init__(self, layout: PackedLayout, pad_token_id: int) -> None:
        """Collate for ``layout``; pad ``row-per-block`` rows with ``pad_token_id``."""
        self.layout = layout
        self.pad_token_id = pad_token_id
        self.flatten = DataCollatorWithFlattening(return_tensors="pt", separator_id=IGNORE_INDEX)

    def __call__(self, features: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        """Collate ``features`` (block rows with ``input_ids``, ``labels``, ``position_ids``)."""
        blocks = [split_block(feature) for feature in features]
        if self.layout == "flattened":
            return dict(self.flatten([example for block in blocks for example in block]))
        rows = [self.flatten(block) for block in blocks]
        width = max(row["input_ids"].shape[1] for row in rows)
        fill = {"input_ids": self.pad_token_id, "labels": IGNORE_INDEX}
        batch: dict[str, list[torch.Tensor]] = {"input_ids": [], "labels": [], "position_ids": []}
        for row in rows:
            pad = width - row["input_ids"].shape[1]
            for key, values in batch.items():
                last = int(row["position_ids"][0, -1]) + 1
                tail = torch.arange(last, last + pad) if key == "position_ids" else torch.full((pad,), fill[key])
                values.append(torch.cat([row[key][0], tail.to(torch.int64)]))
        return {key: torch.stack(values) for key, values in batch.items()}

    def real_tokens(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """The examples' tokens in a batch this collator made, padding left out: an int64 scalar on the batch's device.

        The Trainer's own "non_padding" count compares ``input_ids`` with the pad token when there is no
        ``attention_mask`` (``Trainer._track_num_input_tokens``), so where the pad token is the eos token (SmolLM2,
        and the core's fallback when a tokenizer has none: ``trainer.model.load_tokenizer``) it drops every
        example's eos, about one token in a mean length. Here: ``flattened`` rows hold no padding (every token
        counts); a ``row-per-block`` row's padding is its tail of pad tokens with label -100, which the collator
        appends, so an example's learned eos before it counts. An example whose own last tokens are the pad token
        *and* not learned (a conversation ending on a user turn, a truncated prompt) loses them from the count.
        """
        ids = batch["input_ids"]
        if self.layout == "flattened":
            return torch.tensor(ids.numel(), dtype=torch.int64, device=ids.device)
        filler = (ids == self.pad_token_id) & (batch["labels"] == IGNORE_INDEX)
        tail = torch.cumprod(filler.flip(-1).to(torch.int64), dim=-1).sum()
        return torch.tensor(ids.numel(), dtype=torch.int64, device=ids.device) - tail
