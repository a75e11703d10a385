"""A dataset's length distribution and packed blocks at a seq_len (autotune.schemas.dataset_stats)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from autotune.schemas.dataset_stats import (
    DatasetFingerprint,
    ExampleLengths,
    eval_is_training_data,
    fingerprint,
    fingerprint_difference,
    percentile,
    seq_len_notes,
    summarize,
)

NOWHERE = DatasetFingerprint(path="data.jsonl")


def _lengths(rows: list[tuple[int, int, int]], total: int | None = None) -> ExampleLengths:
    """(length, first learned position, learned tokens) per example."""
    return ExampleLengths(
        format="instruction",
        rows_total=total or len(rows),
        rows_read=len(rows),
        lengths=[r[0] for r in rows],
        first_learned=[r[1] for r in rows],
        learned=[r[2] for r in rows],
    )


def test_kept_truncated_and_learned_follow_the_core() -> None:
    """seq_len 10: a 14-token example is truncated (4 tokens lost) and keeps the learned tokens below position 10;
    one whose first learned label is at 12 is dropped, as build_train_dataset drops it."""
    rows = [(6, 3, 3), (14, 8, 6), (14, 12, 2), (4, 1, 3)]
    stats = summarize(_lengths(rows), 10, NOWHERE, "tok")
    assert stats.examples_kept == 3 and stats.total_tokens == 6 + 10 + 4
    assert stats.learned_tokens == 3 + (10 - 8) + 3
    assert (stats.truncated, stats.tokens_lost) == (2, 8)
    assert stats.max_tokens == 14 and stats.p50_tokens == 6
    assert stats.blocks == 2  # 10 | 6 + 4: best-fit decreasing keeps them whole
    assert stats.packing_efficiency == pytest.approx(20 / 20)


def test_percentiles_are_nearest_rank() -> None:
    values = list(range(1, 101))
    assert (percentile(values, 0.5), percentile(values, 0.9), percentile(values, 0.99)) == (50, 90, 99)
    assert percentile([7], 0.99) == 7 and percentile([], 0.5) == 0


def test_blocks_scale_to_the_rows_not_read() -> None:
    stats = summarize(_lengths([(5, 1, 4)] * 10, total=95), 10, NOWHERE, "tok")
    assert stats.blocks == 5 and stats.scale == pytest.approx(9.5) and stats.blocks_total == 48


def test_seq_len_notes_at_their_thresholds() -> None:
    long_tail = [(50, 1, 40)] * 98 + [(300, 1, 290)] * 2  # 2 % truncated at 256
    notes = seq_len_notes(summarize(_lengths(long_tail), 256, NOWHERE, "tok"))
    assert len(notes) == 1 and "truncates 2 of 100 examples (2.0%" in notes[0]
    one_percent = seq_len_notes(summarize(_lengths([(50, 1, 40)] * 99 + [(300, 1, 290)]), 256, NOWHERE, "tok"))
    assert not any("truncates" in note for note in one_percent)  # 1 % exactly: no note
    slack = seq_len_notes(summarize(_lengths([(100, 1, 90)] * 100), 2048, NOWHERE, "tok"))
    assert len(slack) == 1 and "over 2× the p99 length (100 tokens)" in slack[0] and "e.g. 128" in slack[0]
    assert seq_len_notes(summarize(_lengths([(100, 1, 90)] * 100), 200, NOWHERE, "tok")) == []


def test_fingerprints_tell_other_data(tmp_path: Path) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text('{"text": "a"}\n')
    planned = fingerprint(str(data))
    assert planned.size_bytes == 14 and planned.path == str(data.resolve())
    assert planned.sha256 == hashlib.sha256(data.read_bytes()).hexdigest()
    assert fingerprint_difference(planned, fingerprint(str(data))) is None
    data.write_text('{"text": "b"}\n')
    assert fingerprint_difference(planned, fingerprint(str(data))) == "the same size, other content"
    data.write_text('{"text": "bb"}\n')
    assert fingerprint_difference(planned, fingerprint(str(data))) == "14 bytes then, 15 now"
    hub = fingerprint("tatsu-lab/alpaca")
    assert hub.size_bytes is None and fingerprint_difference(hub, fingerprint("tatsu-lab/alpaca")) is None
    assert fingerprint_difference(hub, fingerprint("other/data")) == "tatsu-lab/alpaca then, other/data now"


def test_fingerprint_covers_the_whole_file(tmp_path: Path) -> None:
    """A same-size edit after the first MiB is other data (issue 41: only the first MiB was hashed)."""
    data = tmp_path / "big.jsonl"
    line = b'{"text": "' + b"a" * 1000 + b'"}\n'
    data.write_bytes(line * 3000)  # about 3 MB
    planned = fingerprint(str(data))
    edited = bytearray(data.read_bytes())
    edited[-5] = ord("b")  # the last row, well after the first MiB; the size unchanged
    data.write_bytes(bytes(edited))
    assert fingerprint_difference(planned, fingerprint(str(data))) == "the same size, other content"


def test_size_is_compared_without_a_hash() -> None:
    """A fingerprint without its hash (a plan from before the hashes) still compares the recorded size."""
    old = DatasetFingerprint(path="/d.jsonl", size_bytes=100)
    assert fingerprint_difference(old, DatasetFingerprint(path="/d.jsonl", size_bytes=101, sha256="0" * 64))
    assert fingerprint_difference(old, DatasetFingerprint(path="/d.jsonl", size_bytes=100, sha256="0" * 64)) is None
    first_mib = DatasetFingerprint(path="/d.jsonl", size_bytes=100, sample_sha256="a" * 64)
    assert fingerprint_difference(first_mib, first_mib.model_copy(update={"sample_sha256": "b" * 64}))


def test_eval_dataset_equal_to_training_data_is_named(tmp_path: Path) -> None:
    data = tmp_path / "train.jsonl"
    data.write_text('{"text": "a"}\n')
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(data.read_bytes())
    other = tmp_path / "eval.jsonl"
    other.write_text('{"text": "b"}\n')
    link = tmp_path / "link.jsonl"
    link.symlink_to(data)
    for same in (data, copy, link):
        warning = eval_is_training_data(str(data), str(same))
        assert warning is not None and "is the training data" in warning and "\n" not in warning
    assert eval_is_training_data(str(data), str(other)) is None
    assert eval_is_training_data("org/data", "org/data") is not None
    assert eval_is_training_data("org/data", "org/other") is None
    assert eval_is_training_data(None, str(data)) is None
