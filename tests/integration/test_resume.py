"""A stopped run resumed with --resume is the uninterrupted run: the same losses, bit-identical final weights.

docs/launcher.md promises it. The runs are the default LoRA and full settings (bf16, activation checkpointing,
LoRA dropout 0, adapters in the compute dtype) on the tiny model, micro batch 2 × 2 accumulation steps, stopped
three times at three different steps — SIGTERM, SIGINT (each saves a checkpoint at the step it stops) and
``kill -9`` (no save: the run continues from the newest periodic checkpoint and repeats the steps after it) — and
resumed each time. Every step's loss of every invocation is compared with the uninterrupted run's loss of that
step, exactly (the core is deterministic on the CPU), and so are the final weights.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import core_fork
import pytest
from trainer_helpers import PlanWriter, core_args, read_report, run_trainer, text_rows, trainer_env, write_jsonl

MAX_STEPS = 8
SAVE_STEPS = 2
STOPS = ((signal.SIGTERM, 2), (signal.SIGINT, 4), (signal.SIGKILL, 5))
"""(signal, the logged step after which it is sent): three different steps, two signals and kill -9."""
STEP_LINE = re.compile(r"step (\d+)/\d+ loss (\S+)")


def _final_weights(run_dir: Path) -> dict[str, bytes]:
    """Every tensor of the final weights as raw bytes (bit-identical means equal bytes)."""
    import torch
    from safetensors.torch import load_file

    tensors: dict[str, bytes] = {}
    for path in sorted((run_dir / "final").glob("*.safetensors")):
        for name, tensor in load_file(path).items():
            tensors[f"{path.name}:{name}"] = tensor.contiguous().view(-1).view(torch.uint8).numpy().tobytes()
    assert tensors, f"no final weights under {run_dir / 'final'}"
    return tensors


def _stop_at(argv: list[str], sig: signal.Signals, after_step: int) -> dict[int, str]:
    """Run the core, send ``sig`` once it logged ``after_step`` (the log line is the marker); return logged losses.

    The run is forked from the worker's server that imported the training stack (``core_fork``): the stops and the
    resumes compute what fresh interpreters compute (the losses are compared with a fresh-interpreter run's).
    """
    logged: dict[int, str] = {}
    seen: list[str] = []
    with tempfile.TemporaryFile("w+") as stdout, core_fork.stderr_lines(argv, trainer_env(), stdout) as (run, lines):
        for line in lines:
            seen.append(line)
            match = STEP_LINE.match(line)
            if match:
                logged[int(match.group(1))] = match.group(2)
                if int(match.group(1)) >= after_step:
                    run.send_signal(sig)
                    break
        rest = lines.read()
        code = run.wait(timeout=120)
    expected = -signal.SIGKILL if sig == signal.SIGKILL else 128 + sig
    assert code == expected, f"rc {code}\n{''.join(seen)}{rest}"
    return logged


@pytest.mark.slow
@pytest.mark.parametrize(
    ("method", "in_backward"),
    [("lora", False), ("full", False), ("full", True)],
    ids=["lora", "full", "full-optimizer-in-backward"],
)
def test_resumed_run_is_the_uninterrupted_run(
    write_plan: PlanWriter, tmp_path: Path, method: str, in_backward: bool
) -> None:
    """The optimizer in backward keeps its per-parameter states in the checkpoint (trainer/in_backward.py)."""
    accumulation = 1 if in_backward else 2  # the lever steps every micro-step
    plan = write_plan(
        method=method, precision="bf16", grad_ckpt=True, micro_batch_size=2, grad_accum=accumulation,
        optimizer_in_backward=in_backward,
    )  # fmt: skip
    data = write_jsonl(tmp_path / "text.jsonl", text_rows())

    def argv(out: Path) -> list[str]:
        return [*core_args(plan, data, out, MAX_STEPS), "--save-steps", str(SAVE_STEPS), "--learning-rate", "1e-2"]

    whole = tmp_path / "whole"
    done = run_trainer(*argv(whole), fresh_interpreter=True)  # the reference: what a new process computes
    assert done.returncode == 0, done.stderr
    reference = read_report(whole)
    assert reference.loss_steps == list(range(1, MAX_STEPS + 1))
    expected = dict(zip(reference.loss_steps, reference.losses, strict=True))

    out = tmp_path / "stopped"
    compared = 0
    killed_after = 0
    for number, (sig, after_step) in enumerate(STOPS):
        logged = _stop_at([*argv(out), *(["--resume"] if number else [])], sig, after_step)
        for step, text in logged.items():  # the log prints 4 decimals
            assert text == f"{expected[step]:.4f}", (method, sig.name, step, text, expected[step])
        if sig == signal.SIGKILL:
            killed_after = max(logged)
            continue  # no report, no save at the kill: the next --resume repeats the steps after the last checkpoint
        report = read_report(out)
        assert report.status == "interrupted" and sig.name in report.message
        assert report.steps >= after_step
        assert (out / "checkpoints" / f"checkpoint-{report.steps}").is_dir()  # saved at the stop
        for step, loss in zip(report.loss_steps, report.losses, strict=True):
            assert loss == expected[step], (method, sig.name, step, loss, expected[step])
            compared += 1

    finished = run_trainer(*argv(out), "--resume")
    assert finished.returncode == 0, finished.stderr
    last = read_report(out)
    assert last.status == "completed" and last.steps == MAX_STEPS
    assert last.loss_steps == list(range(1, MAX_STEPS + 1))  # the whole run: none lost or repeated (issue 41)
    assert last.losses == reference.losses  # the steps before the resume come from the checkpoint's trainer state
    # kill -9 saves nothing: the run went on from the newest checkpoint that was complete at the kill
    assert STOPS[1][1] <= last.resumed_from_step <= killed_after
    for step, loss in zip(last.loss_steps, last.losses, strict=True):
        assert loss == expected[step], (method, "after kill -9", step, loss, expected[step])
        compared += 1
    assert compared >= MAX_STEPS
    assert _final_weights(out) == _final_weights(whole)
    for run_dir in (whole, out):
        assert not (run_dir / "checkpoints" / ".staging").exists()  # no empty staging folder left


@pytest.mark.slow
def test_resume_without_checkpoint_is_refused(write_plan: PlanWriter, tmp_path: Path) -> None:
    plan = write_plan(method="lora")
    data = write_jsonl(tmp_path / "text.jsonl", text_rows(8))
    out = tmp_path / "run"
    out.mkdir()
    proc = run_trainer("--plan", str(plan), "--dataset", str(data), "--output-dir", str(out), "--cpu", "--resume")
    assert proc.returncode == 2
    assert "no checkpoint" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_resume_computes_with_the_thread_count_the_run_started_with(write_plan: PlanWriter, tmp_path: Path) -> None:
    """A CPU matmul's rounding depends on its thread count: the resumed run takes the count its checkpoint records.

    (``autotune launch --cpu`` picks the count from the machine's load, which differs between a run and its resume.)
    """
    plan = write_plan(method="lora", precision="bf16", grad_ckpt=True, micro_batch_size=2, grad_accum=2)
    data = write_jsonl(tmp_path / "text.jsonl", text_rows())
    out = tmp_path / "run"
    argv = [*core_args(plan, data, out, 4), "--save-steps", "100", "--learning-rate", "1e-2"]
    _stop_at(argv, signal.SIGTERM, 1)  # OMP_NUM_THREADS=1 (trainer_env)
    manifest = next((out / "checkpoints").glob("checkpoint-*/autotune_checkpoint.json"))
    assert '"cpu_threads": 1' in manifest.read_text()
    resumed = subprocess.run(
        [sys.executable, "-m", "autotune.trainer", *argv, "--resume"],
        capture_output=True,
        text=True,
        env={**trainer_env(), "OMP_NUM_THREADS": "2"},
        timeout=300,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert "computing with 1 CPU threads, as the run did before the stop" in resumed.stderr
