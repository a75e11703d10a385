"""Full, LoRA and QLoRA runs of the real training core on the CPU: the loss falls, the report is valid."""

from __future__ import annotations

from pathlib import Path

import pytest
from trainer_helpers import (
    PlanWriter,
    chat_rows,
    core_args,
    instruction_rows,
    mean,
    read_report,
    run_trainer,
    text_rows,
    write_jsonl,
)

STEPS = 30


def _assert_learned(out: Path, steps: int) -> None:
    report = read_report(out)
    assert report.status == "completed"
    assert report.steps == steps
    assert report.resumed_from_step == 0
    assert len(report.losses) == steps
    first, last = mean(report.losses[:5]), mean(report.losses[-5:])
    assert last < 0.8 * first, f"loss did not fall: first {first:.3f}, last {last:.3f}"
    assert report.memory_kind == "cpu-rss"
    assert report.peak_memory_gib_measured > 0
    assert report.peak_reserved_gib_measured is None
    assert report.tokens_per_s_measured is not None and report.tokens_per_s_measured > 0
    assert report.step_time_s_measured is not None and report.step_time_s_measured > 0
    assert report.micro_step_time_s_measured is not None
    assert report.micro_step_time_s_measured <= report.step_time_s_measured
    assert report.world_size == 1 and report.device == "cpu"
    assert report.cpu_threads == 1  # trainer_helpers' OMP_NUM_THREADS: what the run computed with
    assert (out / "final").is_dir()


@pytest.mark.slow
def test_lora_instruction_run_learns(write_plan: PlanWriter, tmp_path: Path) -> None:
    plan = write_plan(method="lora", lora_rank=8, lora_alpha=16, lora_dropout=0.0, micro_batch_size=4)
    data = write_jsonl(tmp_path / "instr.jsonl", instruction_rows())
    out = tmp_path / "run"
    proc = run_trainer(
        *core_args(plan, data, out, STEPS),
        "--learning-rate",
        "1e-2",
        "--save-steps",
        "100",
    )
    assert proc.returncode == 0, proc.stderr
    _assert_learned(out, STEPS)
    report = read_report(out)
    assert report.setting.method == "lora"
    assert (out / "final" / "adapter_config.json").is_file()


@pytest.mark.slow
def test_qlora_text_run_learns(write_plan: PlanWriter, tmp_path: Path) -> None:
    plan = write_plan(
        method="qlora", precision="bf16", lora_rank=8, lora_alpha=16, lora_dropout=0.0, micro_batch_size=4
    )
    data = write_jsonl(tmp_path / "text.jsonl", text_rows())
    out = tmp_path / "run"
    proc = run_trainer(
        *core_args(plan, data, out, STEPS),
        "--learning-rate",
        "1e-2",
        "--save-steps",
        "100",
    )
    assert proc.returncode == 0, proc.stderr
    _assert_learned(out, STEPS)
    assert read_report(out).setting.method == "qlora"


@pytest.mark.slow
def test_full_chat_run_with_accumulation_learns(write_plan: PlanWriter, tmp_path: Path) -> None:
    plan = write_plan(method="full", micro_batch_size=2, grad_accum=2, grad_ckpt=True, precision="bf16-mixed")
    data = write_jsonl(tmp_path / "chat.jsonl", chat_rows())
    out = tmp_path / "run"
    proc = run_trainer(
        *core_args(plan, data, out, STEPS),
        "--learning-rate",
        "5e-3",
        "--save-steps",
        "100",
    )
    assert proc.returncode == 0, proc.stderr
    _assert_learned(out, STEPS)
    report = read_report(out)
    # Packed whole: each chat example is 27 tokens, so a block of seq_len 32 holds one example, never a part of the
    # next; tokens seen count real tokens. The last step of an epoch may hold fewer blocks.
    assert report.tokens_seen % 27 == 0
    assert (STEPS - 2) * 2 * 2 * 27 <= report.tokens_seen <= STEPS * 2 * 2 * 27
    assert (out / "final" / "model.safetensors").is_file()
