"""A packed micro batch trains exactly as its examples one by one (issue 26 Done-when, first bullet).

The tiny Llama in fp32 on the CPU, for each attention implementation that :data:`PACKED_LAYOUTS` lets pack and that
runs on a CPU (sdpa, eager): the loss of the packed batch (the collator of the training core) equals the
token-weighted mean of the examples' own losses within 1e-5, and so do the gradients of every parameter. A batch
laid out without the packed-sequence masking (one row, positions 0..n-1) is the control: it must differ.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from trainer_helpers import build_tokenizer, instruction_rows, text_rows

from autotune.schemas.packing import PACKED_LAYOUTS
from autotune.schemas.setting import TrainingSetting
from autotune.trainer.data import IGNORE_INDEX, build_collator, build_train_dataset

CPU_IMPLS = ("sdpa", "eager")


def _model(model_dir: Path, impl: str) -> Any:
    """The tiny model as the core loads it (its ``use_cache=False`` matters: a cache turns the masking off)."""
    from autotune.trainer.model import choose_precision, load_model, resolve_source

    setting = TrainingSetting(method="full", precision="fp32", attention_impl=impl)
    model = load_model(resolve_source(str(model_dir)), setting, choose_precision(setting, cpu=True), None)
    model.train()  # the tiny config has no dropout: train mode is deterministic
    return model


def _blocks(seq_len: int) -> Any:
    import datasets

    rows = [*instruction_rows(5), *text_rows(3)]
    raw = datasets.Dataset.from_list([{"text": r.get("text") or r["instruction"] + " " + r["output"]} for r in rows])
    return build_train_dataset(raw, build_tokenizer(), "text", seq_len, pack=True, name="t")


def _loss_and_grads(model: Any, batch: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    model.zero_grad()
    loss = model(**batch).loss
    loss.backward()
    return float(loss.detach()), {name: p.grad.clone() for name, p in model.named_parameters()}


def _separate(model: Any, blocks: Any) -> tuple[float, dict[str, Any]]:
    """Token-weighted mean of the examples' own losses (each a batch of one), and its gradients."""
    import torch

    from autotune.trainer.packed import split_block

    examples = [example for block in blocks for example in split_block(block)]
    counts = [sum(1 for label in e["labels"][1:] if label != IGNORE_INDEX) for e in examples]
    model.zero_grad()
    total = torch.zeros(())
    for example, count in zip(examples, counts, strict=True):
        one = {key: torch.tensor([values]) for key, values in example.items()}
        total = total + model(**one).loss * count
    mean = total / sum(counts)
    mean.backward()
    return float(mean.detach()), {name: p.grad.clone() for name, p in model.named_parameters()}


@pytest.mark.parametrize("impl", CPU_IMPLS)
def test_a_packed_batch_trains_as_its_examples_one_by_one(tiny_model_dir: Path, impl: str) -> None:
    import torch

    layout = PACKED_LAYOUTS[impl]
    blocks = _blocks(seq_len=48)
    assert len(blocks) >= 3 and any(list(b["position_ids"]).count(0) > 1 for b in blocks)  # several per block
    model = _model(tiny_model_dir, impl)
    batch = build_collator(build_tokenizer(), layout)([blocks[k] for k in range(len(blocks))])
    assert "attention_mask" not in batch
    packed_loss, packed_grads = _loss_and_grads(model, batch)
    separate_loss, separate_grads = _separate(model, blocks)
    assert packed_loss == pytest.approx(separate_loss, abs=1e-5)
    for name, grad in separate_grads.items():
        torch.testing.assert_close(packed_grads[name], grad, atol=1e-5, rtol=1e-4, msg=name)


@pytest.mark.parametrize("impl", CPU_IMPLS)
def test_both_layouts_keep_examples_apart_where_plain_positions_do_not(tiny_model_dir: Path, impl: str) -> None:
    import torch

    blocks = _blocks(seq_len=48)
    features = [blocks[k] for k in range(len(blocks))]
    model = _model(tiny_model_dir, impl)
    flattened = build_collator(build_tokenizer(), "flattened")(features)
    per_block = build_collator(build_tokenizer(), "row-per-block")(features)
    assert flattened["input_ids"].shape[0] == 1 and per_block["input_ids"].shape[0] == len(features)
    assert _loss_and_grads(model, flattened)[0] == pytest.approx(_loss_and_grads(model, per_block)[0], abs=1e-5)
    n = flattened["input_ids"].shape[1]
    leaky = dict(flattened, position_ids=torch.arange(n).unsqueeze(0))  # one long causal sequence
    assert abs(_loss_and_grads(model, leaky)[0] - _loss_and_grads(model, flattened)[0]) > 1e-3


def test_blocks_of_one_example_each_need_no_mask(tiny_model_dir: Path) -> None:
    """Padding continues the last example's positions: a micro batch of one-example blocks of unequal lengths has
    no restart, so transformers builds no packed-sequence mask (sdpa keeps its causal flash path), and its loss is
    that of the examples one by one. With the padding restarting at 0 (the layout before), a mask was built."""
    import datasets
    import torch
    from transformers.masking_utils import find_packed_sequence_indices

    raw = datasets.Dataset.from_list([{"text": "a b c d e f g h i j k l m n o"}, {"text": "p q r s t u"}])
    blocks = build_train_dataset(raw, build_tokenizer(), "text", 16, pack=True, name="t")
    features = [blocks[k] for k in range(len(blocks))]
    assert len(features) == 2 and all(list(f["position_ids"]).count(0) == 1 for f in features)
    batch = build_collator(build_tokenizer(), "row-per-block")(features)
    assert (batch["labels"] == IGNORE_INDEX).any()  # the shorter block is padded
    assert find_packed_sequence_indices(batch["position_ids"]) is None
    restarted = batch["position_ids"].clone()
    pad_from = int((batch["labels"][1] != IGNORE_INDEX).nonzero().max()) + 1
    restarted[1, pad_from:] = torch.arange(restarted.shape[1] - pad_from)
    assert find_packed_sequence_indices(restarted) is not None
    model = _model(tiny_model_dir, "sdpa")
    assert _loss_and_grads(model, batch)[0] == pytest.approx(_separate(model, blocks)[0], abs=1e-5)
