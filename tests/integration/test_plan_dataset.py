"""``plan --dataset`` / ``estimate --dataset``: the user's data as the launch trains on it (issue 26 item 1).

The tiny Llama's own tokenizer; rows of many lengths, some longer than ``seq_len``. The plan's statistics must be
the launch's: the blocks best-fit-decreasing packing makes, the examples kept and truncated, as
``autotune.trainer.data.build_train_dataset`` computes them in process.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_runner import run
from trainer_helpers import WORDS, chat_rows, launch, pattern_text, write_jsonl

SEQ_LEN = 32


def _rows(fmt: str, count: int = 60) -> list[dict[str, Any]]:
    if fmt == "chat":
        rows = chat_rows(count)
        for i, row in enumerate(rows):
            row["messages"][-1]["content"] = pattern_text(i, 2 + (i * 7) % 30)
        return rows
    if fmt == "text":
        return [{"text": pattern_text(i, 3 + (i * 11) % 45)} for i in range(count)]
    return [
        {
            "instruction": f"continue from {WORDS[i % len(WORDS)]}",
            "input": "",
            "output": pattern_text(i, 2 + (i * 7) % 40),
        }
        for i in range(count)
    ]


def _launch_view(model_dir: Path, data: Path) -> tuple[int, int, int]:
    """(blocks, examples kept, examples longer than SEQ_LEN) as the training core builds them."""
    import datasets

    from autotune.trainer.data import TOKENIZERS, build_train_dataset, detect_format
    from autotune.trainer.model import load_tokenizer, resolve_source

    raw = datasets.load_dataset("json", data_files=str(data), split="train")
    fmt = detect_format(list(raw.column_names), "auto", str(data))
    tokenizer = load_tokenizer(resolve_source(str(model_dir)))
    blocks = build_train_dataset(raw, tokenizer, fmt, SEQ_LEN, pack=True, name="d")
    lengths = [len(TOKENIZERS[fmt](dict(row), tokenizer).input_ids) for row in raw]
    kept = sum(len([p for p in block["position_ids"] if p == 0]) for block in blocks)
    return len(blocks), kept, sum(1 for length in lengths if length > SEQ_LEN)


@pytest.mark.slow  # plans on the dataset with its tokenizer: starts the dataset scan (autotune.trainer.lengths)
@pytest.mark.parametrize("fmt", ["instruction", "chat", "text"])
def test_the_plan_sees_the_blocks_the_launch_trains_on(
    fmt: str, tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", _rows(fmt))
    code, out, err = run(capsys, "plan", str(tiny_model_dir), "--gpu", "4090", "--dataset", str(data),
                         "--seq-len", str(SEQ_LEN), "--epochs", "2", "--packing", "packed", "--json")  # fmt: skip
    assert code == 0, err
    result = json.loads(out)
    stats = result["plan_file"]["dataset"]
    blocks, kept, truncated = _launch_view(tiny_model_dir, data)
    assert (stats["blocks"], stats["examples_kept"], stats["truncated"]) == (blocks, kept, truncated)
    assert stats["format"] == fmt and stats["rows_read"] == stats["rows_total"] == 60 and truncated > 0
    assert stats["fingerprint"]["path"] == str(data.resolve()) and stats["fingerprint"]["size_bytes"]
    assert stats["p50_tokens"] <= stats["p90_tokens"] <= stats["p99_tokens"] <= stats["max_tokens"]
    workload = result["plan_file"]["workload"]
    assert workload["num_samples"] == blocks and workload["epochs"] == 2
    assert result["plan"]["num_optimizer_steps"] >= blocks * 2 // workload["global_batch_size"]
    assert any(note.startswith(f"packed: {blocks} blocks of seq_len {SEQ_LEN}") for note in result["notes"])
    assert any("seq_len 32 truncates" in note for note in result["notes"])


@pytest.mark.slow  # plans on the dataset with its tokenizer: starts the dataset scan (autotune.trainer.lengths)
def test_estimate_takes_the_dataset_too(
    tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", _rows("instruction"))
    code, out, err = run(capsys, "estimate", str(tiny_model_dir), "--gpu", "4090", "--dataset", str(data),
                         "--seq-len", str(SEQ_LEN), "--method", "lora", "--max-rows", "20", "--json")  # fmt: skip
    assert code == 0, err
    result = json.loads(out)
    assert result["dataset"]["rows_read"] == 20 and result["dataset"]["rows_total"] == 60
    assert result["num_optimizer_steps"] is not None
    assert any("first 20 of 60 rows" in note for note in result["notes"])


@pytest.mark.slow  # plans on the dataset with its tokenizer: starts the dataset scan (autotune.trainer.lengths)
def test_launch_warns_when_given_other_data(
    tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", _rows("instruction"))
    plan = tmp_path / "plan.yaml"
    code, out, err = run(capsys, "plan", str(tiny_model_dir), "--gpu", "4090", "--dataset", str(data),
                         "--seq-len", str(SEQ_LEN), "-o", str(plan))  # fmt: skip
    assert code == 0, err
    assert f"autotune launch {plan} --dataset {data.absolute()} --output-dir RUN" in out  # the data it was made for
    other = write_jsonl(tmp_path / "other.jsonl", _rows("instruction", 30))
    for dataset, warned in ((data, False), (other, True)):
        code, _, err = run(capsys, "launch", str(plan), "--dataset", str(dataset), "--output-dir",
                           str(tmp_path / "run"), "--cpu", "--dry-run")  # fmt: skip
        assert code == 0, err
        assert ("the plan was made for the dataset" in err) is warned, err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("llama3-8b",), "--dataset needs the model's tokenizer, and llama3-8b has none here: pass --tokenizer"),
        (("MODEL", "--num-samples", "5"), "--dataset gives the data's size"),
        (("MODEL", "--max-rows", "0"), "--max-rows must be at least 1"),
        (("MODEL", "--dataset-format", "csv"), "--dataset-format 'csv': choose one of"),
        (("MODEL", "--packing", "sorted"), "--packing 'sorted': choose one of auto, packed, padded"),
    ],
)
def test_bad_input_is_one_line(
    args: tuple[str, ...], message: str, tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", _rows("instruction"))
    argv = [str(tiny_model_dir) if a == "MODEL" else a for a in args]
    code, _, err = run(capsys, "plan", argv[0], "--gpu", "4090", "--dataset", str(data), *argv[1:])
    assert code == 2 and len(err.strip().splitlines()) == 1 and message in err, err


def test_a_broken_row_is_named_as_the_launch_names_it(
    tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "bad.jsonl"
    data.write_text('{"instruction": "a", "output": "b"}\n{broken\n')
    code, _, err = run(capsys, "plan", str(tiny_model_dir), "--gpu", "4090", "--dataset", str(data))
    assert code == 2 and f"dataset {data} line 2: not valid JSON" in err, err


@pytest.mark.parametrize("epochs", ["1", "2"])
def test_the_launch_runs_the_predicted_number_of_optimizer_steps(
    epochs: str, tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 26 Done-when: ``launch`` of a ``plan --dataset --epochs E`` plan (no ``--max-steps``) runs exactly the
    plan's ``num_optimizer_steps`` (the Trainer's rule: ⌈E × ⌈micro batches / accumulation⌉⌉)."""
    from trainer_helpers import read_report

    rows = [{"instruction": f"continue from {WORDS[i % 12]}", "output": pattern_text(i, 22)} for i in range(13)]
    data = write_jsonl(tmp_path / "d.jsonl", rows)  # one example per block: 13 blocks
    plan = tmp_path / "plan.yaml"
    code, _, err = run(capsys, "plan", str(tiny_model_dir), "--gpu", "4090", "--dataset", str(data), "--seq-len",
                       str(SEQ_LEN), "--global-batch-size", "6", "--micro-batch-size", "2", "--method", "lora",
                       "--no-compile", "--precision", "fp32", "--epochs", epochs, "-o", str(plan))  # fmt: skip
    assert code == 0, err
    from autotune.schemas.plan_io import load_plan

    planned = load_plan(plan)
    predicted = planned.prediction.num_optimizer_steps
    assert planned.dataset is not None and planned.dataset.blocks == 13
    assert predicted == {"1": 3, "2": 6}[epochs]  # ⌈13 / 2⌉ = 7 micro batches → 3 steps per epoch (not ⌈26 / 6⌉ = 5)
    code, _, err = launch(capsys, str(plan), "--dataset", str(data), "--output-dir", str(tmp_path / "run"),
                          "--cpu", "--save-steps", "1000")  # fmt: skip
    assert code == 0, err[-3000:]
    assert read_report(tmp_path / "run").steps == predicted


def test_padded_batches_are_planned_and_launched_one_example_per_row(
    tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--packing padded``: one sequence per kept example (13, where packing makes fewer blocks), priced from the
    length distribution; the launch batches them padded and runs the predicted steps. ``auto`` says what it chose."""
    from trainer_helpers import read_report

    from autotune.schemas.plan_io import load_plan
    from autotune.schemas.workload import PaddedBatches

    rows = [{"instruction": f"go {WORDS[i % 12]}", "output": pattern_text(i, 2 + i % 3)} for i in range(13)]
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    common = ["--gpu", "4090", "--dataset", str(data), "--seq-len", str(SEQ_LEN), "--global-batch-size", "4",
              "--micro-batch-size", "2", "--method", "lora", "--no-compile", "--precision", "fp32"]  # fmt: skip
    code, out, err = run(capsys, "plan", str(tiny_model_dir), *common, "--json")
    assert code == 0, err
    result = json.loads(out)
    assert any(note.startswith("packing: ") and "--packing" in note for note in result["notes"]), result["notes"]
    packed_blocks = result["plan_file"]["dataset"]["blocks"]
    assert packed_blocks < 13
    plan = tmp_path / "plan.yaml"
    code, _, err = run(capsys, "plan", str(tiny_model_dir), *common, "--packing", "padded", "-o", str(plan))
    assert code == 0, err
    planned = load_plan(plan)
    workload = planned.workload
    assert planned.dataset is not None and planned.dataset.packing == "padded"
    assert workload.num_samples == 13 and isinstance(workload.batches, PaddedBatches)
    assert workload.batches.lengths is not None and workload.batches.lengths.longest_tokens <= SEQ_LEN
    # every row is padded to its micro batch's longest: more tokens computed than real ones
    assert workload.computed_tokens_per_sequence(2) > workload.tokens_per_sequence
    predicted = planned.prediction.num_optimizer_steps
    assert predicted == 4  # ⌈13 / 2⌉ = 7 micro batches → ⌈7 / 2⌉ steps
    code, _, err = launch(capsys, str(plan), "--dataset", str(data), "--output-dir", str(tmp_path / "run"),
                          "--cpu", "--save-steps", "1000")  # fmt: skip
    assert code == 0, err[-3000:]
    assert read_report(tmp_path / "run").steps == predicted


@pytest.mark.slow  # plans on the dataset with its tokenizer: starts the dataset scan (autotune.trainer.lengths)
def test_launch_model_plans_on_its_dataset_as_plan_does(
    tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``launch MODEL --dataset D --packing padded`` plans on D exactly as ``plan --dataset D`` does (issue 41 item 5):
    the same dataset table, layout and fingerprint in the plan it would write, and the same workload."""
    import hashlib

    import yaml

    from autotune.schemas.plan_io import load_plan

    rows = [{"instruction": f"go {WORDS[i % 12]}", "output": pattern_text(i, 2 + i % 3)} for i in range(13)]
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    common = ["--gpu", "4090", "--dataset", str(data), "--seq-len", str(SEQ_LEN), "--global-batch-size", "4",
              "--micro-batch-size", "2", "--method", "lora", "--no-compile", "--precision", "fp32", "--packing",
              "padded", "--max-rows", "12"]  # fmt: skip
    plan = tmp_path / "plan.yaml"
    code, _, err = run(capsys, "plan", str(tiny_model_dir), *common, "-o", str(plan))
    assert code == 0, err
    planned = load_plan(plan)
    code, out, err = run(capsys, "launch", str(tiny_model_dir), *common, "--output-dir", str(tmp_path / "run"),
                         "--cpu", "--dry-run", "--show-files")  # fmt: skip
    assert code == 0, err
    launched = yaml.safe_load(out[out.index("autotune_version:") :].split("\ntraining: ")[0])
    assert planned.dataset is not None and launched["dataset"] == planned.dataset.model_dump(mode="json")
    assert launched["dataset"]["packing"] == "padded" and launched["dataset"]["rows_read"] == 12  # --max-rows acted
    assert launched["dataset"]["fingerprint"]["sha256"] == hashlib.sha256(data.read_bytes()).hexdigest()
    assert launched["workload"] == planned.workload.model_dump(mode="json")
