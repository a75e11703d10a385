"""A user's dataset as the plan sees it: its examples' token lengths, their distribution, the packed blocks.

Pure and torch-free. The lengths come from the training core's own tokenization (``python -m
autotune.trainer.lengths``, run by ``autotune plan --dataset`` in a subprocess); this module turns them into what
the plan uses and records:

- :func:`summarize` — the :class:`DatasetStats` at the plan's ``seq_len``: examples kept (as the core keeps them:
  truncated to ``seq_len``, dropped when nothing is left to learn), total and learned tokens, p50 / p90 / p99 / max
  length, the examples and tokens ``seq_len`` truncates, and the blocks that best-fit-decreasing packing gives
  (:func:`autotune.schemas.packing.best_fit_decreasing`, the core's packing) with their efficiency;
- :func:`fingerprint` — path, size and a hash of the first bytes, so that ``autotune launch`` can tell other data
  from the data the plan was made for;
- :func:`seq_len_notes` — when ``seq_len`` truncates more than 1 % of the examples, or is more than twice the p99
  length (issue 26's thresholds).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from pydantic import Field

from autotune.schemas._base import StrictModel
from autotune.schemas.packing import best_fit_decreasing

DEFAULT_MAX_ROWS: Final[int] = 200_000
"""Rows tokenized at most (``--max-rows``); the rest of a larger dataset is assumed alike and scaled."""

SAMPLE_BYTES: Final[int] = 1 << 20
"""Bytes of the file hashed for its fingerprint (its first MiB): enough to tell two datasets apart, cheap for
large files."""

TRUNCATION_NOTE_FRACTION: Final[float] = 0.01
"""A ``seq_len`` that truncates more than this fraction of the examples gets a note."""

SLACK_NOTE_FACTOR: Final[float] = 2.0
"""A ``seq_len`` more than this many times the p99 length gets a note (most blocks hold many examples, or
padded batches carry mostly padding)."""


SEQ_LEN_STEP: Final[int] = 64
"""A suggested shorter ``seq_len`` is the p99 length rounded up to a multiple of this (tensor-core friendly)."""


class ExampleLengths(StrictModel):
    """Per-example token counts of a dataset, as ``python -m autotune.trainer.lengths`` prints them.

    The three lists have one entry per example read, in file order.
    """

    format: str = Field(description="Dataset format: instruction, chat or text.")
    rows_total: int = Field(ge=0, description="Rows in the dataset.")
    rows_read: int = Field(ge=0, description="Rows tokenized (at most --max-rows).")
    lengths: list[int] = Field(description="Tokens of each example before truncation.")
    first_learned: list[int] = Field(description="Position of each example's first learned label (≥ 1).")
    learned: list[int] = Field(description="Learned tokens of each example before truncation.")


class DatasetFingerprint(StrictModel):
    """Which file a plan was made for."""

    path: str = Field(description="The dataset as given, resolved to an absolute path for a local file.")
    size_bytes: int | None = Field(default=None, description="File size in bytes (None for a hub dataset).")
    sample_sha256: str | None = Field(default=None, description="SHA-256 of the file's first MiB.")


class DatasetStats(StrictModel):
    """A dataset's length distribution at the plan's ``seq_len`` and the blocks packing makes of it."""

    fingerprint: DatasetFingerprint = Field(description="Which file: path, size and a hash of its first MiB.")
    format: str = Field(description="instruction, chat or text.")
    tokenizer: str = Field(description="Where the tokenizer came from (model directory, .gguf, hub id).")
    rows_total: int = Field(ge=0, description="Rows in the dataset.")
    rows_read: int = Field(ge=0, description="Rows tokenized; the rest are assumed alike (scaled).")
    seq_len: int = Field(ge=1, description="The plan's sequence length the figures below are for.")
    examples_kept: int = Field(ge=0, description="Examples the core trains on (with a learned token after truncation).")
    total_tokens: int = Field(ge=0, description="Tokens of the kept examples after truncation (rows read).")
    learned_tokens: int = Field(ge=0, description="Learned tokens of the kept examples after truncation (rows read).")
    p50_tokens: int = Field(ge=0, description="Median example length before truncation.")
    p90_tokens: int = Field(ge=0, description="90th percentile length (nearest rank).")
    p99_tokens: int = Field(ge=0, description="99th percentile length (nearest rank).")
    max_tokens: int = Field(ge=0, description="Longest example before truncation.")
    truncated: int = Field(ge=0, description="Examples longer than seq_len (truncated to it).")
    tokens_lost: int = Field(ge=0, description="Tokens cut by that truncation.")
    blocks: int = Field(ge=0, description="Blocks of seq_len that best-fit-decreasing packing makes of the rows read.")
    packing_efficiency: float = Field(ge=0, le=1, description="Real tokens / (blocks × seq_len).")

    @property
    def scale(self) -> float:
        """Rows in the dataset per row read (1 when every row was read)."""
        return self.rows_total / self.rows_read if self.rows_read else 1.0

    @property
    def blocks_total(self) -> int:
        """Packed blocks of the whole dataset (the rows read scaled to all rows)."""
        return max(1, math.ceil(self.blocks * self.scale)) if self.blocks else 0


def percentile(sorted_values: Sequence[int], fraction: float) -> int:
    """The nearest-rank percentile of ascending ``sorted_values`` (0 when empty): the ⌈fraction·n⌉-th value."""
    if not sorted_values:
        return 0
    rank = max(1, math.ceil(fraction * len(sorted_values)))
    return sorted_values[rank - 1]


def summarize(lengths: ExampleLengths, seq_len: int, fingerprint_: DatasetFingerprint, tokenizer: str) -> DatasetStats:
    """The :class:`DatasetStats` of ``lengths`` at ``seq_len``.

    Kept examples follow the core (``autotune.trainer.data.build_train_dataset``): truncated to ``seq_len`` and kept
    when a learned label remains at a position below ``seq_len``. Learned tokens after truncation are exact for the
    instruction and text formats (whose learned tokens are a suffix) and an upper bound for chat.
    """
    kept: list[int] = []
    learned_kept = 0
    for length, first, learned in zip(lengths.lengths, lengths.first_learned, lengths.learned, strict=True):
        if first >= seq_len or learned == 0:
            continue
        kept.append(min(length, seq_len))
        learned_kept += learned if length <= seq_len else min(learned, seq_len - first)
    ordered = sorted(lengths.lengths)
    bins = best_fit_decreasing(kept, seq_len) if kept else []
    total = sum(kept)
    return DatasetStats(
        fingerprint=fingerprint_,
        format=lengths.format,
        tokenizer=tokenizer,
        rows_total=lengths.rows_total,
        rows_read=lengths.rows_read,
        seq_len=seq_len,
        examples_kept=len(kept),
        total_tokens=total,
        learned_tokens=learned_kept,
        p50_tokens=percentile(ordered, 0.50),
        p90_tokens=percentile(ordered, 0.90),
        p99_tokens=percentile(ordered, 0.99),
        max_tokens=ordered[-1] if ordered else 0,
        truncated=sum(1 for length in ordered if length > seq_len),
        tokens_lost=sum(length - seq_len for length in ordered if length > seq_len),
        blocks=len(bins),
        packing_efficiency=total / (len(bins) * seq_len) if bins else 0.0,
    )


def fingerprint(dataset: str) -> DatasetFingerprint:
    """Path, size and the SHA-256 of the first MiB of a local file; the name alone for a hub dataset."""
    path = Path(dataset).expanduser()
    if not path.is_file():
        return DatasetFingerprint(path=dataset)
    with path.open("rb") as handle:
        sample = handle.read(SAMPLE_BYTES)
    return DatasetFingerprint(
        path=str(path.resolve()), size_bytes=path.stat().st_size, sample_sha256=hashlib.sha256(sample).hexdigest()
    )


def fingerprint_difference(planned: DatasetFingerprint, given: DatasetFingerprint) -> str | None:
    """Why ``given`` is not the data ``planned`` describes (one clause), or None when it is the same."""
    if planned.sample_sha256 is not None and given.sample_sha256 is not None:
        if planned.size_bytes != given.size_bytes:
            return f"{planned.size_bytes:,} bytes then, {given.size_bytes:,} now"
        if planned.sample_sha256 != given.sample_sha256:
            return "the same size, other content"
        return None
    return None if planned.path == given.path else f"{planned.path} then, {given.path} now"


def seq_len_notes(stats: DatasetStats) -> list[str]:
    """Notes on ``seq_len`` against the lengths: truncating over 1 % of the examples, or over 2× the p99 length."""
    notes: list[str] = []
    read = max(1, stats.rows_read)
    if stats.truncated > TRUNCATION_NOTE_FRACTION * read:
        share = stats.truncated / read
        notes.append(
            f"seq_len {stats.seq_len} truncates {stats.truncated:,} of {read:,} examples ({share:.1%}, "
            f"{stats.tokens_lost:,} tokens lost; p99 {stats.p99_tokens:,}, max {stats.max_tokens:,}): a longer "
            "--seq-len keeps them whole"
        )
    if stats.p99_tokens and stats.seq_len > SLACK_NOTE_FACTOR * stats.p99_tokens:
        shorter = math.ceil(stats.p99_tokens / SEQ_LEN_STEP) * SEQ_LEN_STEP
        notes.append(
            f"seq_len {stats.seq_len} is over {SLACK_NOTE_FACTOR:g}× the p99 length ({stats.p99_tokens:,} tokens): "
            f"a shorter --seq-len (e.g. {shorter:,}) needs less memory per sequence"
        )
    return notes
