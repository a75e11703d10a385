"""A disk that fills during a checkpoint save ends the run in one line saying what was kept, never a traceback
(issue 19 item 6). torch.save reports a short write as ``RuntimeError: [enforce fail at inline_container.cc]
... unexpected pos N vs M``, with no errno; the slow test makes the checkpoint's torch.save fail that way."""

from __future__ import annotations

import errno
import subprocess
import sys
from pathlib import Path

import pytest

from autotune.trainer import checkpoints
from autotune.trainer.checkpoints import out_of_space

TORCH_SHORT_WRITE = "[enforce fail at inline_container.cc:664] . unexpected pos 4736 vs 4630"


@pytest.mark.parametrize(
    "error",
    [
        OSError(errno.ENOSPC, "No space left on device"),
        OSError(errno.EDQUOT, "Disk quota exceeded"),
        RuntimeError(TORCH_SHORT_WRITE),
        RuntimeError("PytorchStreamWriter failed writing file data/0: file write failed"),
        Exception("Error while serializing: I/O error: No space left on device (os error 28)"),
    ],
    ids=["enospc", "edquot", "torch-short-write", "torch-write-failed", "safetensors"],
)
def test_full_disk_errors_are_recognised(error: BaseException, tmp_path: Path) -> None:
    assert out_of_space(error, tmp_path)
    wrapped = ValueError("saving failed")
    wrapped.__cause__ = error
    assert out_of_space(wrapped)


def test_other_errors_are_not_a_full_disk_unless_the_disk_is_full(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert not out_of_space(RuntimeError("shape mismatch"), tmp_path)
    monkeypatch.setattr(checkpoints, "free_bytes", lambda directory: 4096)
    assert out_of_space(RuntimeError("some writer failed"), tmp_path)


RUNNER = """
import sys
import torch
import autotune.trainer.train  # the training stack
from autotune.trainer.__main__ import main

real_save = torch.save

def save(obj, f, *args, **kwargs):
    if "checkpoint-" in str(f):
        raise RuntimeError(sys.argv[1])
    return real_save(obj, f, *args, **kwargs)

torch.save = save
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.slow
def test_a_disk_full_checkpoint_save_is_one_line(tmp_path: Path) -> None:
    from trainer_helpers import (
        build_plan_file,
        core_args,
        read_report,
        run_command,
        save_tiny_model,
        text_rows,
        write_jsonl,
    )

    model = save_tiny_model(tmp_path / "tiny")
    plan = build_plan_file(model, tmp_path / "plan.yaml", method="lora", micro_batch_size=2)
    data = write_jsonl(tmp_path / "text.jsonl", text_rows(16))
    out = tmp_path / "run"
    runner = tmp_path / "runner.py"
    runner.write_text(RUNNER)
    argv = [sys.executable, str(runner), TORCH_SHORT_WRITE, *core_args(plan, data, out, 4), "--save-steps", "2"]
    done: subprocess.CompletedProcess[str] = run_command(argv, timeout_s=300)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "unexpected pos" in errors[0] and "free the space and resume" in errors[0]
    assert read_report(out).status == "failed"
    assert not list((out / "checkpoints").glob("checkpoint-*"))  # the cut save was never published
