"""An eval loss on held-out data (issue 26 item 3): ``--eval-fraction`` / ``--eval-dataset`` and ``--eval-steps``.

The training core on the tiny Llama on the CPU: the eval loss is logged every ``--eval-steps`` and at the end, in the
log and in ``run_report.json``; the held-out rows of ``--eval-fraction`` never train; bad combinations are one line
before anything is written.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from cli_runner import run
from trainer_helpers import FinishedRun, PlanWriter, core_args, instruction_rows, read_report, run_trainer, write_jsonl


def test_a_held_out_fraction_is_evaluated_every_eval_steps_and_at_the_end(finished_lora_run: FinishedRun) -> None:
    """The shared run (tests/integration/conftest.py): 40 rows, ``--eval-fraction 0.2 --eval-steps 2``, 3 steps."""
    done, report = finished_lora_run.launched, read_report(finished_lora_run.output_dir)
    assert report.eval_loss_steps == [2, 3]  # every 2 steps, and the end (3 is not a multiple of 2)
    assert all(math.isfinite(loss) and loss > 0 for loss in report.eval_losses)
    assert "held out 8 of 40 rows" in done.stderr and "40 instruction examples" not in done.stderr
    assert "32 instruction examples" in done.stderr  # the training rows are the other 32
    lines = (done.stdout + done.stderr).splitlines()
    assert [line.split()[-1] for line in lines if line.startswith("eval loss ")] == ["2", "3"]


def test_an_eval_dataset_is_evaluated_once_at_the_end_without_eval_steps(
    write_plan: PlanWriter, tmp_path: Path
) -> None:
    plan = write_plan(method="lora", micro_batch_size=2, grad_accum=1, precision="fp32")
    data = write_jsonl(tmp_path / "d.jsonl", instruction_rows(16))
    held_out = write_jsonl(tmp_path / "eval.jsonl", instruction_rows(6))
    out = tmp_path / "run"
    done = run_trainer(*core_args(plan, data, out, 2), "--eval-dataset", str(held_out))
    assert done.returncode == 0, done.stderr[-3000:]
    report = read_report(out)
    assert report.eval_loss_steps == [2] and len(report.eval_losses) == 1


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--eval-dataset", "EVAL", "--eval-fraction", "0.1"), "give --eval-dataset or --eval-fraction, not both"),
        (("--eval-steps", "2"), "--eval-steps needs held-out data"),
        (("--eval-fraction", "0.6"), "--eval-fraction"),
        (("--eval-dataset", "MISSING"), "not found"),
    ],
)
def test_bad_eval_options_are_one_line_before_anything_is_written(
    flags: tuple[str, ...], message: str, write_plan: PlanWriter, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = write_plan(method="lora", micro_batch_size=2, grad_accum=1, precision="fp32")
    data = write_jsonl(tmp_path / "d.jsonl", instruction_rows(8))
    held_out = write_jsonl(tmp_path / "eval.jsonl", instruction_rows(4))
    swap = {"EVAL": str(held_out), "MISSING": str(tmp_path / "missing.jsonl")}
    out = tmp_path / "run"
    code, _, err = run(capsys, "launch", str(plan), "--dataset", str(data), "--output-dir", str(out), "--cpu",
                       *[swap.get(flag, flag) for flag in flags])  # fmt: skip
    assert code == 2 and len(err.strip().splitlines()) == 1 and message in err, err
    assert not out.exists()
