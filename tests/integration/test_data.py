"""Tokenization (``Dataset.map``), packing whole examples and the collators (padded, packed) of the training core.

Fast (no training): the tiny word-level tokenizer of the integration tests, datasets built in memory.
"""

from __future__ import annotations

import logging
import random
from pathlib import Path
from typing import Any

import pytest
from trainer_helpers import WORDS, PlanWriter, build_tokenizer, instruction_rows, pattern_text, text_rows

from autotune.errors import ConfigError
from autotune.trainer.data import IGNORE_INDEX, build_collator, build_train_dataset, tokenize_instruction
from autotune.trainer.packed import split_block


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return build_tokenizer()


def _dataset(rows: list[dict[str, Any]]) -> Any:
    import datasets

    return datasets.Dataset.from_list(rows)


def _skewed_rows(count: int, seed: int) -> list[dict[str, str]]:
    """Instruction rows whose answers have long-tailed lengths (log-normal words, as instruction data has)."""
    rng = random.Random(seed)
    return [
        {"instruction": f"continue from {WORDS[i % len(WORDS)]}", "input": "", "output": pattern_text(i, length)}
        for i in range(count)
        for length in [max(1, round(rng.lognormvariate(2.5, 0.9)))]
    ]


@pytest.mark.parametrize("seed", [0, 1])
def test_packing_keeps_every_example_whole_in_one_block(
    tokenizer: Any, seed: int, caplog: pytest.LogCaptureFixture
) -> None:
    rows = _skewed_rows(300, seed)
    seq_len = 48
    examples = [tokenize_instruction(row, tokenizer) for row in rows]
    lengths = [len(e.input_ids) for e in examples]
    assert max(lengths) > seq_len > min(lengths)  # some are truncated, most share a block
    with caplog.at_level(logging.INFO, logger="autotune.trainer"):
        built = build_train_dataset(_dataset(rows), tokenizer, "instruction", seq_len, pack=True, name="t")
    expected = sorted(
        (e.input_ids[:seq_len], e.labels[:seq_len])
        for e in examples
        if any(label != IGNORE_INDEX for label in e.labels[1:seq_len])
    )
    found = []
    for block in built:
        assert len(block["input_ids"]) == len(block["labels"]) == len(block["position_ids"]) <= seq_len
        found += [(part["input_ids"], part["labels"]) for part in split_block(block)]
    assert sorted(found) == expected  # each example once, whole, in one block: none is split across two
    assert len(built) < len(expected)  # packed: blocks hold several examples
    truncated = sum(1 for n in lengths if n > seq_len)
    lost = sum(n - seq_len for n in lengths if n > seq_len)
    efficiency = sum(len(ids) for ids, _ in expected) / (len(built) * seq_len)
    assert f"{len(built)} blocks, packing efficiency {efficiency:.1%}" in caplog.text
    assert f"{truncated} truncated to seq_len ({lost} tokens lost)" in caplog.text


def test_packed_blocks_restart_positions_at_each_example(tokenizer: Any) -> None:
    rows = text_rows(3)  # 24 words + eos = 25 tokens each: two per block of 50, one alone
    built = build_train_dataset(_dataset(rows), tokenizer, "text", 50, pack=True, name="t")
    assert [row["position_ids"] for row in built] == [[*range(25), *range(25)], list(range(25))]


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


def test_the_packed_collator_restarts_positions_and_masks_each_first_label() -> None:
    block = {"input_ids": [5, 6, 7, 8, 9], "labels": [IGNORE_INDEX, 6, 7, 8, 9], "position_ids": [0, 1, 2, 0, 1]}
    short = {"input_ids": [10, 11], "labels": [10, 11], "position_ids": [0, 1]}
    tokenizer = build_tokenizer()
    flat = build_collator(tokenizer, "flattened")([block, short])
    assert flat["input_ids"].tolist() == [[5, 6, 7, 8, 9, 10, 11]]
    assert flat["labels"].tolist() == [[IGNORE_INDEX, 6, 7, IGNORE_INDEX, 9, IGNORE_INDEX, 11]]
    assert flat["position_ids"].tolist() == [[0, 1, 2, 0, 1, 0, 1]]
    rows = build_collator(tokenizer, "row-per-block")([block, short])
    pad = tokenizer.pad_token_id
    assert rows["input_ids"].tolist() == [[5, 6, 7, 8, 9], [10, 11, pad, pad, pad]]
    assert rows["labels"].tolist() == [[IGNORE_INDEX, 6, 7, IGNORE_INDEX, 9], [IGNORE_INDEX, 11, *[IGNORE_INDEX] * 3]]
    assert rows["position_ids"].tolist() == [[0, 1, 2, 0, 1], [0, 1, 2, 3, 4]]  # padding continues the last example
    assert "attention_mask" not in rows and "attention_mask" not in flat


@pytest.mark.parametrize("fmt", ["instruction", "text"])
def test_batched_tokenization_gives_the_ids_of_row_by_row(tokenizer: Any, fmt: str) -> None:
    """``tokenize_rows`` (one tokenizer call per batch) equals ``TOKENIZERS[fmt]`` row by row, input column or not."""
    from autotune.trainer.data import TOKENIZERS, tokenize_rows

    if fmt == "instruction":
        rows: list[dict[str, Any]] = _skewed_rows(40, 3)
        rows[1]["input"] = "with some input"
    else:
        rows = text_rows(40)
    batch = {column: [row[column] for row in rows] for column in rows[0]}
    assert tokenize_rows(batch, fmt, tokenizer) == [TOKENIZERS[fmt](row, tokenizer) for row in rows]


@pytest.mark.parametrize("layout", ["flattened", "row-per-block"])
def test_the_packed_count_keeps_each_eos_where_the_pad_token_is_the_eos(layout: str) -> None:
    # the tiny tokenizer with its pad token set to its eos, as SmolLM2 ships and load_tokenizer falls back to
    tokenizer = build_tokenizer()
    tokenizer.pad_token = tokenizer.eos_token
    eos = tokenizer.eos_token_id
    block = {
        "input_ids": [5, 6, eos, 8, eos],
        "labels": [IGNORE_INDEX, 6, eos, 8, eos],
        "position_ids": [0, 1, 2, 0, 1],
    }
    short = {"input_ids": [10, eos], "labels": [10, eos], "position_ids": [0, 1]}
    collator = build_collator(tokenizer, layout)
    batch = collator([block, short])
    assert int(collator.real_tokens(batch)) == 7  # 5 + 2 real tokens, the three eos among them
    trainer_count = int((batch["input_ids"] != tokenizer.pad_token_id).sum())  # the Trainer's own rule
    assert trainer_count == 4  # it dropped them: why the core counts packed batches itself


def test_the_core_trainer_counts_a_packed_batch_with_its_eos(write_plan: PlanWriter, tiny_model_dir: Path) -> None:
    from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

    from autotune.schemas.plan_io import load_plan
    from autotune.trainer.staged_save import staged_trainer_class

    tokenizer = build_tokenizer()
    tokenizer.pad_token = tokenizer.eos_token
    eos = tokenizer.eos_token_id
    block = {"input_ids": [5, 6, eos], "labels": [IGNORE_INDEX, 6, eos], "position_ids": [0, 1, 2]}
    short = {"input_ids": [10, eos], "labels": [10, eos], "position_ids": [0, 1]}
    collator = build_collator(tokenizer, "row-per-block")
    trainer_class = staged_trainer_class(Trainer, load_plan(write_plan()))
    trainer = trainer_class(
        model=AutoModelForCausalLM.from_pretrained(tiny_model_dir),
        args=TrainingArguments(
            output_dir=str(tiny_model_dir / "unused"), include_num_input_tokens_seen="non_padding", use_cpu=True
        ),
        data_collator=collator,
        processing_class=tokenizer,
    )
    trainer._track_num_input_tokens(collator([block, short]))
    assert trainer.state.num_input_tokens_seen == 5  # 3 + 2: both eos counted, the padding row tail not


@pytest.mark.slow
def test_a_packed_run_reports_every_real_token_where_the_pad_token_is_the_eos(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    """One epoch of packed blocks, the tokenizer's pad token set to its eos (as SmolLM2 ships): the run report's
    tokens seen are all the blocks' tokens, each example's eos included (transformers' own count dropped them)."""
    import math
    import shutil

    import datasets
    from trainer_helpers import build_plan_file, core_args, read_report, run_trainer, write_jsonl

    model_dir = tmp_path / "pad-is-eos"
    shutil.copytree(tiny_model_dir, model_dir)
    tokenizer = build_tokenizer()
    tokenizer.pad_token = tokenizer.eos_token
    tokenizer.save_pretrained(model_dir)
    data = write_jsonl(tmp_path / "text.jsonl", text_rows(24))
    raw = datasets.load_dataset("json", data_files=str(data), split="train")
    blocks = build_train_dataset(raw, tokenizer, "text", 32, pack=True, name="t")
    real = sum(len(block["input_ids"]) for block in blocks)
    plan = build_plan_file(model_dir, tmp_path / "plan.yaml", method="lora", micro_batch_size=2)
    steps = math.ceil(len(blocks) / 2)
    proc = run_trainer(*core_args(plan, data, tmp_path / "run", max_steps=steps))
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = read_report(tmp_path / "run")
    assert report.steps == steps
    assert report.tokens_seen == real
    assert tokenizer.eos_token_id in {token for block in blocks for token in block["input_ids"]}
