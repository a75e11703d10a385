"""Token lengths of a dataset's examples (``trainer/lengths.py``), in-process on the tiny word-level tokenizer.

The contract (:class:`autotune.schemas.dataset_stats.ExampleLengths`): per example read, its tokens before
truncation, the position of its first learned label (its length when none), and its learned tokens (the first
label never counts); at most ``max_rows`` rows in file order; progress on stderr; errors one line and exit code 2.
Expected figures are counted by hand: each word is one token of the tokenizer, the Alpaca prompt without input is 9
(``### Instruction : <3 words> ### Response :``), and every example ends with an eos.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("datasets")

from trainer_helpers import build_tokenizer, write_jsonl

from autotune.schemas.dataset_stats import ExampleLengths
from autotune.trainer.lengths import example_lengths, main
from autotune.trainer.model import load_tokenizer, resolve_source  # imported at collection, outside the tests


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tokenizer")
    built = build_tokenizer()
    built.save_pretrained(path)
    assert load_tokenizer(resolve_source(str(path))).get_vocab() == built.get_vocab()  # the launch's loader reads it
    return path


def test_text_and_instruction_examples_are_measured_as_the_launch_tokenizes_them(
    tokenizer_dir: Path, tmp_path: Path
) -> None:
    text = write_jsonl(tmp_path / "t.jsonl", [{"text": "red blue"}, {"text": "red blue green pink"}])
    measured = example_lengths(str(text), str(tokenizer_dir), "auto", max_rows=100)
    assert (measured["format"], measured["rows_total"], measured["rows_read"]) == ("text", 2, 2)
    assert (measured["lengths"], measured["first_learned"], measured["learned"]) == ([3, 5], [1, 1], [2, 4])
    rows = [{"instruction": "continue from red", "input": "", "output": "green pink"}]
    instruction = write_jsonl(tmp_path / "i.jsonl", rows)
    measured = example_lengths(str(instruction), str(tokenizer_dir), "instruction", max_rows=100)
    assert (measured["lengths"], measured["first_learned"], measured["learned"]) == ([12], [9], [3])
    ExampleLengths.model_validate(measured)  # the schema the planner reads


def test_at_most_max_rows_are_read_in_file_order_with_progress(
    tokenizer_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from autotune.trainer import lengths

    monkeypatch.setattr(lengths, "BATCH_ROWS", 2)  # progress is said after each batch
    data = write_jsonl(tmp_path / "t.jsonl", [{"text": " ".join(["red"] * n)} for n in range(1, 8)])
    measured = example_lengths(str(data), str(tokenizer_dir), "text", max_rows=5, progress_every=2)
    assert (measured["rows_total"], measured["rows_read"], measured["lengths"]) == (7, 5, [2, 3, 4, 5, 6])
    assert capsys.readouterr().err.splitlines() == ["progress 2 5", "progress 4 5"]


def test_the_command_prints_one_json_object_or_one_error_line_and_exit_2(
    tokenizer_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_jsonl(tmp_path / "t.jsonl", [{"text": "red"}])
    assert main(["--dataset", str(data), "--tokenizer", str(tokenizer_dir)]) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert out["lengths"] == [2]
    assert main(["--dataset", str(tmp_path / "missing.jsonl"), "--tokenizer", str(tokenizer_dir)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith("error: dataset file") and captured.err.count("\n") == 1
