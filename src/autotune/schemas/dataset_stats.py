"""A user's dataset as the plan sees it: its examples' token lengths, their distribution, the packed blocks.

Pure and torch-free. The lengths come from the training core's own tokenization (``python -m
autotune.trainer.lengths``, run by ``autotune plan --dataset`` in a subprocess); this module turns them into what
the plan uses and records:

- :func:`summarize` — the :class:`DatasetStats` at the plan's ``seq_len``: examples kept (as the core keeps them:
  truncated to ``seq_len``, dropped when nothing is left to learn), total and learned tokens, p50 / p90 / p99 / max
  length, the examples and tokens ``seq_len`` truncates, and the blocks that best-fit-decreasing packing gives
  (:func:`autotune.schemas.packing.best_fit_decreasing`, the core's packing) with their efficiency;
- :func:`dataset_batches` — the workload's sequences and batches of either layout (:func:`padded_batches`, or
  :func:`packed_batches` with Σ lᵢ² / Σ lᵢ and the share of blocks holding more than one example: what attention
  over them costs, issue 26);
- :func:`fingerprint` — path, size and a SHA-256 of the whole file (streamed), so that ``autotune launch`` can tell
  other data from the data the plan was made for;
- :func:`seq_len_notes` — when ``seq_len`` truncates more than 1 % of the examples, or is more than twice the p99
  length (issue 26's thresholds).
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Final, Literal

from pydantic import Field

from autotune.schemas._base import StrictModel
from autotune.schemas.packing import best_fit_decreasing
from autotune.schemas.workload import Batches, FilledBatches, PackedBatches, PaddedBatches, PaddedLengths

DEFAULT_MAX_ROWS: Final[int] = 200_000
"""Rows tokenized at most (``--max-rows``); the rest of a larger dataset is assumed alike and scaled."""

HASH_CHUNK_BYTES: Final[int] = 1 << 20
"""The fingerprint's hash reads the file in chunks of this size (1 MiB): constant memory for any file. Its cost,
measured by ``python benchmarks/dataset_fingerprint.py``: about 3.3 s per GiB on the 2-core development machine
(OpenSSL's SHA-256 with SHA-NI, the file in the page cache), once per ``plan --dataset`` and once per launch."""

TRUNCATION_NOTE_FRACTION: Final[float] = 0.01
"""A ``seq_len`` that truncates more than this fraction of the examples gets a note."""

SLACK_NOTE_FACTOR: Final[float] = 2.0
"""A ``seq_len`` more than this many times the p99 length gets a note (most blocks hold many examples, or
padded batches carry mostly padding)."""


LENGTH_BINS: Final[int] = 200
"""``DatasetStats.length_quantiles`` holds one length per 0.5 % of the kept examples, the quantile at each bin's
middle ((k + ½) / 200, nearest rank), each standing for its bin: ``Workload.computed_tokens_per_sequence`` prices a
padded micro batch from them. On log-normal lengths (σ 0.6–1.5, 5,000 examples) E[longest of b] from the 200 is
within 0.1–3.1 % (under) of the exact one from every length for b = 1…32 (100 bins: up to 11 %; the 0…100 %
quantiles with the maximum as one of 101: up to 26 % over); a test bounds it."""


SEQ_LEN_STEP: Final[int] = 64
"""A suggested shorter ``seq_len`` is the p99 length rounded up to a multiple of this (tensor-core friendly)."""


Packing = Literal["packed", "padded"]
"""How a dataset's examples are batched: whole examples packed into blocks of seq_len, or one per row, padded."""

PACKINGS: Final[tuple[Packing, ...]] = ("packed", "padded")
"""The layouts ``plan --packing`` chooses between (``auto``: the one whose whole run is faster)."""


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
    sha256: str | None = Field(default=None, description="SHA-256 of the whole file (None for a hub dataset).")
    sample_sha256: str | None = Field(
        default=None, description="SHA-256 of the file's first MiB (plans written before the whole-file sha256)."
    )


class DatasetStats(StrictModel):
    """A dataset's length distribution at the plan's ``seq_len`` and the blocks packing makes of it."""

    fingerprint: DatasetFingerprint = Field(description="Which file: path, size and a hash of its content.")
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
    length_quantiles: list[int] = Field(
        default_factory=list,
        description="Kept examples' lengths after truncation, one per 0.5 % of them (:func:`length_bins`): what "
        "padded batches are priced from (empty in plans written before it).",
    )
    attention_span_tokens: float = Field(
        default=0.0,
        ge=0,
        description="Σ lᵢ² / Σ lᵢ over the kept examples' lengths after truncation, in tokens: the keys an average "
        "token's example holds, what attention costs per token when it stays inside each example (flash-attn's "
        "varlen kernels on flattened packed rows). 0 in plans written before it.",
    )
    single_example_blocks: int = Field(
        default=-1,
        ge=-1,
        description="Packed blocks that hold one example only (their row needs no block-diagonal mask); -1 in plans "
        "written before it.",
    )
    packing: Packing = Field(
        default="packed",
        description="How the plan batches the examples: whole examples packed into blocks of seq_len, or one example "
        "per row padded to the longest of its micro batch (``plan --packing``).",
    )

    @property
    def scale(self) -> float:
        """Rows in the dataset per row read (1 when every row was read)."""
        return self.rows_total / self.rows_read if self.rows_read else 1.0

    @property
    def examples_total(self) -> int:
        """Kept examples of the whole dataset (the rows read scaled to all rows): the padded batches' sequences."""
        return max(1, math.ceil(self.examples_kept * self.scale)) if self.examples_kept else 0

    @property
    def mean_kept_tokens(self) -> float:
        """Mean tokens of a kept example after truncation (0 with none)."""
        return self.total_tokens / self.examples_kept if self.examples_kept else 0.0

    @property
    def blocks_total(self) -> int:
        """Packed blocks of the whole dataset (the rows read scaled to all rows)."""
        return max(1, math.ceil(self.blocks * self.scale)) if self.blocks else 0


def packed_batches(stats: DatasetStats) -> PackedBatches | FilledBatches:
    """The packed blocks of ``stats`` (blocks of ``seq_len``, with what attention over them costs).

    Statistics written before the attention statistics give filled batches: full blocks of one example each, as the
    packed workload was priced before issue 26.
    """
    if not (stats.attention_span_tokens > 0 and stats.single_example_blocks >= 0 and stats.blocks > 0):
        return FilledBatches()
    return PackedBatches(
        # keys per block token: Σ lᵢ² / (blocks × seq_len), so block tokens × it is Σ lᵢ² (a flattened micro batch
        # carries no block padding: the real tokens are the packing efficiency's share of the blocks')
        attention_span_tokens=stats.attention_span_tokens * stats.packing_efficiency,
        multi_example_block_share=1 - stats.single_example_blocks / stats.blocks,
    )


def padded_batches(stats: DatasetStats) -> PaddedBatches:
    """The padded batches of ``stats`` (one kept example per sequence, padded to its micro batch's longest).

    Raises:
        ValueError: ``stats`` has no kept example or no length quantiles (a plan file written before them).
    """
    if not stats.examples_kept or not stats.length_quantiles:
        raise ValueError("no kept examples with length quantiles: padded batches cannot be priced")
    lengths = PaddedLengths(
        quantiles=tuple(stats.length_quantiles), longest_tokens=min(stats.max_tokens, stats.seq_len)
    )
    return PaddedBatches(tokens_per_sample=stats.mean_kept_tokens, lengths=lengths)


def dataset_batches(stats: DatasetStats, packing: Packing) -> tuple[int, Batches]:
    """(sequences, batches) of ``stats``'s examples batched as ``packing``: its packed blocks or its kept examples.

    The workload's ``num_samples`` and ``batches`` (``Workload.with_dataset``).

    Raises:
        ValueError: padded batches of statistics without lengths (:func:`padded_batches`).
    """
    if packing == "packed":
        return max(1, stats.blocks_total), packed_batches(stats)
    return stats.examples_total, padded_batches(stats)


def percentile(sorted_values: Sequence[int], fraction: float) -> int:
    """The nearest-rank percentile of ascending ``sorted_values`` (0 when empty): the ⌈fraction·n⌉-th value."""
    if not sorted_values:
        return 0
    rank = max(1, math.ceil(fraction * len(sorted_values)))
    return sorted_values[rank - 1]


def length_bins(lengths: Sequence[int]) -> list[int]:
    """``LENGTH_BINS`` lengths: the nearest-rank quantile at each equal bin's middle of ``lengths`` ([] for none)."""
    ordered = sorted(lengths)
    return [percentile(ordered, (k + 0.5) / LENGTH_BINS) for k in range(LENGTH_BINS)] if ordered else []


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
    span = sum(length * length for length in kept) / total if total else 0.0
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
        length_quantiles=length_bins(kept),
        attention_span_tokens=span,
        single_example_blocks=sum(1 for members in bins if len(members) == 1),
    )


def fingerprint(dataset: str) -> DatasetFingerprint:
    """Path, size and the SHA-256 of the whole file (streamed in constant memory); the name alone for a hub dataset.

    Raises:
        ConfigError: the path exists but is not a regular file, or cannot be read
            (:func:`autotune.yamlio.open_regular`).
    """
    path = Path(dataset).expanduser()
    if not path.exists() and not path.is_symlink():
        return DatasetFingerprint(path=dataset)
    digest = hashlib.sha256()
    from autotune.yamlio import open_regular  # not at import: yamlio loads PyYAML, which a warm plan skips

    with open_regular(path, "dataset") as handle:
        size = os.fstat(handle.fileno()).st_size
        while chunk := handle.read(HASH_CHUNK_BYTES):
            digest.update(chunk)
    return DatasetFingerprint(path=str(path.resolve()), size_bytes=size, sha256=digest.hexdigest())


def fingerprint_difference(planned: DatasetFingerprint, given: DatasetFingerprint) -> str | None:
    """Why ``given`` is not the data ``planned`` describes (one clause), or None when it is the same.

    The sizes are compared whenever both are known, then the whole-file hashes (or, for a plan written before them,
    the first-MiB hashes) when both have one; a hub dataset by its name.
    """
    if planned.size_bytes is not None and given.size_bytes is not None:
        if planned.size_bytes != given.size_bytes:
            return f"{planned.size_bytes:,} bytes then, {given.size_bytes:,} now"
        for then, now in ((planned.sha256, given.sha256), (planned.sample_sha256, given.sample_sha256)):
            if then is not None and now is not None:
                return None if then == now else "the same size, other content"
        return None
    return None if planned.path == given.path else f"{planned.path} then, {given.path} now"


def eval_is_training_data(dataset: str | None, eval_dataset: str | None) -> str | None:
    """A one-line warning when ``eval_dataset`` is the training ``dataset`` itself, else None.

    The same: one file (the same inode, also through a link or another spelling of the path), two local files of the
    same size and whole-file SHA-256 (:func:`fingerprint`; the hashes only when the sizes agree), or one hub name.
    The eval loss would then measure rows the run trains on.

    Raises:
        ConfigError: a local path that is not a regular file (:func:`fingerprint`).
    """
    if dataset is None or eval_dataset is None:
        return None
    train, held = Path(dataset).expanduser(), Path(eval_dataset).expanduser()
    if train.is_file() and held.is_file():
        same = os.path.samefile(train, held) or (
            train.stat().st_size == held.stat().st_size
            and fingerprint_difference(fingerprint(dataset), fingerprint(eval_dataset)) is None
        )
    else:
        same = dataset == eval_dataset
    if not same:
        return None
    return (
        f"--eval-dataset {eval_dataset} is the training data ({dataset}): its eval loss would measure rows the run "
        "trains on; give held-out rows (another file, or --eval-fraction)"
    )


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
