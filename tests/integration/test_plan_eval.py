"""The eval loss planned and launched (issue 26): ``plan --eval-fraction/--eval-steps`` prices the evals the launch
of its plan runs; ``sweep --dataset`` prices each point on the data, through plan's path.

The tiny Llama's own tokenizer on the CPU, as ``test_plan_dataset``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_runner import run
from trainer_helpers import WORDS, launch, pattern_text, read_report, write_jsonl

SEQ_LEN = 32


def _rows(count: int) -> list[dict[str, str]]:
    return [{"instruction": f"go {WORDS[i % 12]}", "output": pattern_text(i, 22)} for i in range(count)]


def test_the_launch_of_a_plan_runs_the_planned_evals_and_steps(
    tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """20 rows (one example per block), 4 held out: 16 train → ⌈16 / 2⌉ = 8 micro batches → 4 steps; evals at 2, 4."""
    from autotune.schemas.plan_io import load_plan
    from autotune.schemas.workload import EvalSet

    data = write_jsonl(tmp_path / "d.jsonl", _rows(20))
    plan = tmp_path / "plan.yaml"
    code, _, err = run(capsys, "plan", str(tiny_model_dir), "--gpu", "4090", "--dataset", str(data), "--seq-len",
                       str(SEQ_LEN), "--global-batch-size", "4", "--micro-batch-size", "2", "--method", "lora",
                       "--no-compile", "--precision", "fp32", "--packing", "packed", "--eval-fraction", "0.2",
                       "--eval-steps", "2", "-o", str(plan))  # fmt: skip
    assert code == 0, err
    planned = load_plan(plan)
    assert planned.eval_data is not None and planned.eval_data.eval_fraction == 0.2
    assert (planned.workload.num_samples, planned.workload.eval) == (16, EvalSet(samples=4, steps=2))
    prediction = planned.prediction
    assert (prediction.num_optimizer_steps, prediction.num_evals) == (4, 2)
    assert prediction.eval_time_s is not None and prediction.eval_time_s > 0
    # no eval option: the plan's
    code, _, err = launch(capsys, str(plan), "--dataset", str(data), "--output-dir", str(tmp_path / "run"),
                          "--cpu", "--save-steps", "1000")  # fmt: skip
    assert code == 0, err[-3000:]
    report = read_report(tmp_path / "run")
    assert report.steps == prediction.num_optimizer_steps
    assert len(report.eval_loss_steps) == prediction.num_evals and report.eval_loss_steps == [2, 4]


@pytest.mark.parametrize(("args", "message"), [
    (("--eval-fraction", "1.5"), "--eval-fraction: Input should be less than 0.5"),
    (("--eval-fraction", "0"), "--eval-fraction: Input should be greater than 0"),
    (("--eval-fraction", "-0.1"), "--eval-fraction: Input should be greater than 0"),
    (("--eval-steps", "3"), "--eval-steps needs held-out data"),
])  # fmt: skip
@pytest.mark.parametrize("command", ["plan", "estimate"])
def test_bad_eval_options_are_one_line(
    command: str, args: tuple[str, ...], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "plan.yaml"
    extra = ["-o", str(out)] if command == "plan" else []
    code, _, err = run(capsys, command, "llama3-8b", "--gpu", "h100", "--num-samples", "100", *args, *extra)
    assert code == 2 and len(err.strip().splitlines()) == 1 and message in err, err
    assert not out.exists()


@pytest.mark.slow  # plans on the dataset with its tokenizer: starts the dataset scan (autotune.trainer.lengths)
def test_sweep_prices_each_point_on_the_dataset(
    tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each seq_len's cell is the plan of the data at that seq_len: the same steps as ``plan --dataset``."""
    rows = [{"instruction": f"go {WORDS[i % 12]}", "output": pattern_text(i, 3 + (i * 7) % 40)} for i in range(30)]
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    common = ["--gpu", "4090", "--dataset", str(data), "--global-batch-size", "4", "--packing", "packed"]
    code, out, err = run(capsys, "sweep", str(tiny_model_dir), *common, "--seq-len", "32,64", "--methods", "lora",
                         "--json")  # fmt: skip
    assert code == 0, err
    cells = {cell["seq_len"]: cell for cell in json.loads(out)["cells"]}
    for seq_len in (32, 64):
        code, out, err = run(capsys, "plan", str(tiny_model_dir), *common, "--seq-len", str(seq_len), "--method",
                             "lora", "--json")  # fmt: skip
        assert code == 0, err
        planned = json.loads(out)
        cell = cells[seq_len]
        assert cell["packing"] == "packed" and cell["fits"]
        assert cell["setting"] == planned["plan"]["setting"]
        assert cell["total_time_s"] == pytest.approx(planned["plan"]["total_time_s"])
    assert cells[32]["total_time_s"] != cells[64]["total_time_s"]  # more, shorter blocks at 32 than at 64
