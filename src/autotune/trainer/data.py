"""Training data: load with ``datasets``, tokenize in one of three formats, truncate, pack or pad.

Formats (auto-detected from the columns unless given):
- instruction: ``instruction``, optional ``input``, ``output``; the prompt uses the Stanford Alpaca
  template (Taori et al. 2023) and is masked from the loss (label -100), the output plus eos is learned.
- chat: ``messages`` = a list of ``{"role", "content"}``; rendered with the tokenizer's chat template;
  only the assistant turns are learned, everything else (system, user, the assistant header) is masked.
- text: ``text``; every token is learned (continued pre-training).
Examples are truncated to ``seq_len``, then either packed whole into blocks of at most ``seq_len`` tokens
(best-fit decreasing, attention kept inside each example: :mod:`autotune.trainer.packed`) or padded per batch.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transformers import DataCollatorForSeq2Seq, PreTrainedTokenizerBase

from autotune.errors import ConfigError, first_line
from autotune.schemas.dataset_format import DATASET_LOADERS
from autotune.schemas.dataset_format import detect_format as detect_format  # re-exported for train.py
from autotune.schemas.packing import PackedLayout
from autotune.trainer.packed import IGNORE_INDEX as IGNORE_INDEX  # re-exported for chunked_loss and the tests
from autotune.trainer.packed import PackedCollator, pack_examples

logger = logging.getLogger("autotune.trainer")

ALPACA_PROMPT = "### Instruction:\n{instruction}\n\n### Response:\n"
ALPACA_PROMPT_WITH_INPUT = "### Instruction:\n{instruction}\n\n### Input:\n{input}\n\n### Response:\n"
"""Prompt templates of Stanford Alpaca (github.com/tatsu-lab/stanford_alpaca, train.py), without preamble."""

_LOADERS = DATASET_LOADERS


@dataclass(frozen=True)
class TokenizedExample:
    """One example as token ids and labels (same length; -100 where the token is not learned)."""

    input_ids: list[int]
    labels: list[int]


def load_raw_dataset(dataset: str) -> Any:
    """Load the ``train`` split of a local file (JSONL / JSON / parquet / txt) or of a hub dataset.

    Raises:
        ConfigError: missing file, unsupported extension, unreadable content, or an unreachable hub name.
    """
    import datasets

    datasets.disable_progress_bars()
    path = Path(dataset).expanduser()
    if path.exists():
        if path.is_dir():
            raise ConfigError(f"dataset {dataset} is a directory: give a .jsonl, .json, .parquet or .txt file")
        loader = _LOADERS.get(path.suffix.lower())
        if loader is None:
            raise ConfigError(
                f"dataset {dataset}: unsupported file type {path.suffix!r} (use .jsonl, .json, .parquet or .txt)"
            )
        try:
            return datasets.load_dataset(loader, data_files=str(path), split="train", keep_in_memory=True)
        except Exception as error:  # datasets raises many types for a malformed file
            raise ConfigError(f"dataset {dataset} cannot be read as {loader}: {first_line(error)}") from error
    if dataset.startswith(("/", ".", "~")) or path.suffix.lower() in _LOADERS:
        raise ConfigError(f"dataset file {dataset} not found")
    try:
        return datasets.load_dataset(dataset, split="train")
    except Exception as error:
        raise ConfigError(
            f"dataset {dataset} is neither a local file nor a reachable hub dataset: {first_line(error)}"
        ) from error


def _encode(tokenizer: PreTrainedTokenizerBase, text: str, first: bool) -> list[int]:
    ids: list[int] = tokenizer(text, add_special_tokens=first)["input_ids"]
    return ids


def _instruction_prompt(example: dict[str, Any]) -> str:
    instruction, extra = str(example["instruction"]), example.get("input")
    if extra:
        return ALPACA_PROMPT_WITH_INPUT.format(instruction=instruction, input=extra)
    return ALPACA_PROMPT.format(instruction=instruction)


def _instruction_example(prompt_ids: list[int], answer_ids: list[int]) -> TokenizedExample:
    return TokenizedExample(input_ids=prompt_ids + answer_ids, labels=[IGNORE_INDEX] * len(prompt_ids) + answer_ids)


def tokenize_instruction(example: dict[str, Any], tokenizer: PreTrainedTokenizerBase) -> TokenizedExample:
    """Alpaca prompt (masked) + output + eos (learned)."""
    prompt_ids = _encode(tokenizer, _instruction_prompt(example), first=True)
    answer_ids = _encode(tokenizer, str(example["output"]), first=False) + _eos(tokenizer)
    return _instruction_example(prompt_ids, answer_ids)


def tokenize_chat(example: dict[str, Any], tokenizer: PreTrainedTokenizerBase) -> TokenizedExample:
    """Render ``messages`` with the chat template; learn only the assistant turns.

    The rendering is split into segments by rendering growing prefixes of the conversation: the text
    a message adds is learned if it is an assistant message, except for the assistant header that the
    template's generation prompt emits. Needs a template whose renderings of prefixes are prefixes of
    each other (true of ChatML, Llama 3, Mistral and Gemma templates).

    Raises:
        ConfigError: no chat template, malformed messages, or a template that is not prefix-stable.
    """
    messages = example["messages"]
    if getattr(tokenizer, "chat_template", None) is None:
        raise ConfigError("chat data needs a tokenizer with a chat template, and this tokenizer has none")
    if not isinstance(messages, list) or not all(
        isinstance(m, dict) and "role" in m and "content" in m for m in messages
    ):
        raise ConfigError("chat data: every 'messages' entry must be a list of {role, content} objects")
    segments: list[tuple[str, bool]] = []  # (text, learned)
    rendered = ""
    for index, message in enumerate(messages):
        if message["role"] == "assistant":
            header = _render(tokenizer, messages[:index], generation_prompt=True) if index else ""
            if index and header.startswith(rendered):
                segments.append((header[len(rendered) :], False))
                rendered = header
        full = _render(tokenizer, messages[: index + 1], generation_prompt=False)
        if not full.startswith(rendered):
            raise ConfigError("the tokenizer's chat template is not prefix-stable; use the instruction or text format")
        segments.append((full[len(rendered) :], message["role"] == "assistant"))
        rendered = full
    input_ids: list[int] = []
    labels: list[int] = []
    for text, learned in segments:
        if not text:
            continue
        ids = _encode(tokenizer, text, first=False)
        input_ids += ids
        labels += ids if learned else [IGNORE_INDEX] * len(ids)
    return TokenizedExample(input_ids=input_ids, labels=labels)


def tokenize_text(example: dict[str, Any], tokenizer: PreTrainedTokenizerBase) -> TokenizedExample:
    """Text + eos, every token learned."""
    ids = _encode(tokenizer, str(example["text"]), first=True) + _eos(tokenizer)
    return TokenizedExample(input_ids=ids, labels=list(ids))


TOKENIZERS: dict[str, Callable[[dict[str, Any], PreTrainedTokenizerBase], TokenizedExample]] = {
    "instruction": tokenize_instruction,
    "chat": tokenize_chat,
    "text": tokenize_text,
}


def tokenize_rows(batch: dict[str, list[Any]], fmt: str, tokenizer: PreTrainedTokenizerBase) -> list[TokenizedExample]:
    """Tokenize a batch of rows (column → values, as ``datasets`` slices them) in format ``fmt``.

    The same ids as :data:`TOKENIZERS` row by row (a test checks it), but the instruction and text formats encode the
    whole batch in one tokenizer call each (a fast tokenizer encodes a list in Rust, without a Python call per row:
    ``autotune plan --dataset`` reads 100,000 rows); chat renders its template row by row.
    """
    columns = list(batch)
    rows = [dict(zip(columns, values, strict=True)) for values in zip(*batch.values(), strict=True)]
    if fmt == "instruction":
        prompts = tokenizer([_instruction_prompt(row) for row in rows], add_special_tokens=True)["input_ids"]
        answers = tokenizer([str(row["output"]) for row in rows], add_special_tokens=False)["input_ids"]
        eos = _eos(tokenizer)
        return [_instruction_example(p, a + eos) for p, a in zip(prompts, answers, strict=True)]
    if fmt == "text":
        eos = _eos(tokenizer)
        texts = tokenizer([str(row["text"]) for row in rows], add_special_tokens=True)["input_ids"]
        return [TokenizedExample(input_ids=ids + eos, labels=ids + eos) for ids in texts]
    tokenize = TOKENIZERS[fmt]
    return [tokenize(row, tokenizer) for row in rows]


def build_train_dataset(
    raw: Any, tokenizer: PreTrainedTokenizerBase, fmt: str, seq_len: int, pack: bool, name: str
) -> Any:
    """Tokenize ``raw`` in format ``fmt``, truncate each example to ``seq_len``, and pack it or keep it one per row.

    Tokenization is a ``datasets.Dataset.map(batched=True)`` pass (in memory, no cache files). An example longer
    than ``seq_len`` is truncated to its first ``seq_len`` tokens (counted in the log line with the tokens lost);
    one with no learned token after that is dropped (its first label never counts: no token predicts it).
    Packed: whole examples go into blocks of at most ``seq_len`` tokens by best-fit decreasing
    (:func:`autotune.trainer.packed.pack_examples`), rows ``input_ids`` / ``labels`` / ``position_ids`` (restarting
    at 0 per example), for :class:`~autotune.trainer.packed.PackedCollator`; the log line gives the blocks and the
    packing efficiency. Otherwise one example per row, for the padding collator.

    Raises:
        ConfigError: nothing left to learn.
    """
    import datasets

    def tokenize_batch(batch: dict[str, list[Any]]) -> dict[str, list[list[int]]]:
        examples = tokenize_rows(batch, fmt, tokenizer)
        return {"input_ids": [e.input_ids for e in examples], "labels": [e.labels for e in examples]}

    tokenized = raw.map(tokenize_batch, batched=True, remove_columns=raw.column_names, keep_in_memory=True)
    all_ids, all_labels = tokenized["input_ids"], tokenized["labels"]
    lengths = [len(ids) for ids in all_ids]
    truncated = sum(1 for length in lengths if length > seq_len)
    tokens_lost = sum(length - seq_len for length in lengths if length > seq_len)
    kept = [
        (ids[:seq_len], labels[:seq_len])
        for ids, labels in zip(all_ids, all_labels, strict=True)
        if any(label != IGNORE_INDEX for label in labels[1:seq_len])
    ]
    if not kept:
        raise ConfigError(f"dataset {name}: no learnable tokens after tokenizing as {fmt} (seq_len {seq_len})")
    input_ids, labels = [ids for ids, _ in kept], [lab for _, lab in kept]
    if pack:
        blocks = pack_examples(input_ids, labels, seq_len)
        columns = {"input_ids": blocks.input_ids, "labels": blocks.labels, "position_ids": blocks.position_ids}
        layout = f"packed whole: {len(blocks.input_ids)} blocks, packing efficiency {blocks.efficiency:.1%}"
    else:
        columns, layout = {"input_ids": input_ids, "labels": labels}, f"{len(input_ids)} padded rows"
    logger.info(
        "dataset %s: %d %s examples, %d kept → %s (seq_len %d); %d truncated to seq_len (%d tokens lost)",
        name,
        len(lengths),
        fmt,
        len(kept),
        layout,
        seq_len,
        truncated,
        tokens_lost,
    )
    return datasets.Dataset.from_dict(columns)


def build_collator(
    tokenizer: PreTrainedTokenizerBase, layout: PackedLayout | None = None
) -> DataCollatorForSeq2Seq | PackedCollator:
    """The collator of a run: padded batches (``layout`` None) or packed blocks laid out as ``layout``.

    Padded: the transformers ``DataCollatorForSeq2Seq`` pads ``input_ids`` / ``labels`` to the longest in the
    batch, on the right (a shallow copy of the tokenizer is set so; the run's tokenizer is saved as loaded); labels
    of padding are ``IGNORE_INDEX`` and ``attention_mask`` is 0 there; tensors are int64 of shape (b, s_max).
    Packed: :class:`~autotune.trainer.packed.PackedCollator` (padding with the tokenizer's pad token).
    """
    if layout is not None:
        return PackedCollator(layout, int(tokenizer.pad_token_id))
    padding = copy.copy(tokenizer)
    padding.padding_side = "right"
    return DataCollatorForSeq2Seq(padding, padding="longest", label_pad_token_id=IGNORE_INDEX, return_tensors="pt")


def _render(tokenizer: PreTrainedTokenizerBase, messages: list[dict[str, Any]], generation_prompt: bool) -> str:
    try:
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation_prompt)
    except Exception as error:  # jinja errors of a template that rejects the conversation
        raise ConfigError(f"chat template failed on a conversation: {first_line(error)}") from error
    return str(text)


def _eos(tokenizer: PreTrainedTokenizerBase) -> list[int]:
    return [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else []
