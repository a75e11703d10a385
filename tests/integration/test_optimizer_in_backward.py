"""``optimizer_in_backward``: the core steps each parameter in the backward and tracks the standard path's losses.

Tolerance, derived: with one micro-step per optimizer step and no clipping, the step in the backward is the same
AdamW update of each parameter from the same gradient. A parameter's update runs after its gradient is accumulated,
and the backward node that used the weight (for the input's gradient) has already run, so no later gradient reads an
updated weight (autograd's version counter would raise if one did). The only difference is the kernel: the Trainer's
optimizer is one ``torch.optim.AdamW`` over every parameter (on the CPU ``_default_to_fused_or_foreach`` picks the
for-loop, per tensor), the lever one per parameter — the same per-tensor arithmetic. So the losses are equal up to
the order of float reductions: fp32 runs agree to 1e-5 relative (a few ulps of fp32 summed over 20 steps); pure bf16
runs (weights and moments in bf16, 8 mantissa bits, ulp 2^-8 = 0.4 %) to 2^-8 relative per step, bounded over the
run by 2 % (the measured deviations are printed by the assertion on failure). The standard path runs with clipping
out of reach (``trainer_helpers.UNCLIPPED``), as the lever runs without clipping. ``benchmarks/lever_losses.py``
prints the measured deviations.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from trainer_helpers import (
    core_args,
    read_report,
    run_command,
    text_rows,
    tiny_model_spec,
    unclipped_losses,
    write_jsonl,
)

from autotune.schemas.plan_io import save_plan

AUTOTUNE = [sys.executable, "-c", "from autotune.cli.app import main; main()"]

STEPS = 20
TOLERANCE_CASES = [("fp32", "adamw", 1e-5), ("bf16", "adamw", 0.02), ("fp32", "adamw-8bit", 1e-5)]
"""(precision, optimizer, relative tolerance of each step's loss): the derivation is the module docstring's."""


@pytest.mark.slow
@pytest.mark.parametrize(("precision", "optimizer", "rel"), TOLERANCE_CASES)
def test_in_backward_tracks_the_standard_path(
    tiny_model_dir: Path, tmp_path: Path, precision: str, optimizer: str, rel: float
) -> None:
    """20 steps of the tiny model: the lever's losses equal the Trainer's optimizer's within the derived tolerance."""
    fields = {"precision": precision, "optimizer": optimizer}
    standard = unclipped_losses(tiny_model_dir, tmp_path, "standard", STEPS, **fields)
    in_backward = unclipped_losses(tiny_model_dir, tmp_path, "in-backward", STEPS, optimizer_in_backward=True, **fields)
    assert in_backward == pytest.approx(standard, rel=rel)
    assert in_backward[-1] < in_backward[0]  # it trains


@pytest.mark.slow
def test_paged_optimizer_gives_the_plain_losses(tiny_model_dir: Path, tmp_path: Path) -> None:
    """On the CPU bitsandbytes' paged optimizer falls back to plain state buffers: the same losses as adamw-8bit.

    The 4090 plan's levers together (paged 8-bit AdamW in the backward, the chunked loss, checkpointing) against
    8-bit AdamW stepped by the Trainer with the same loss.
    """
    shared = {"loss_impl": "chunked", "grad_ckpt": True}
    plain = unclipped_losses(tiny_model_dir, tmp_path, "plain", STEPS, optimizer="adamw-8bit", **shared)
    paged = unclipped_losses(
        tiny_model_dir, tmp_path, "paged", STEPS, optimizer="paged-adamw-8bit", optimizer_in_backward=True, **shared
    )
    assert paged == pytest.approx(plain, rel=1e-5)


@pytest.mark.slow
def test_the_4090_full_plan_launches_on_the_cpu_with_the_tiny_model(tiny_model_dir: Path, tmp_path: Path) -> None:
    """``plan llama3-8b --gpu 4090 --method full --seq-len 2048`` (the global batch the planner chose, its levers),
    with the tiny model in place of Llama-3-8B and seq_len 32, runs 4 steps of ``autotune launch --cpu``.

    Every lever of the plan runs on the CPU: pure bf16, paged 8-bit AdamW (plain state buffers there) stepped inside
    the backward, the chunked loss, checkpointing. torch.compile, which the plan also chooses, is turned off here:
    inductor's CPU compile of the model costs minutes of the suite and is not one of issue 44's levers.
    """
    from autotune.session.planning import PlanOptions, plan_from_options
    from autotune.session.setting_options import SettingOptions

    options = PlanOptions(model="llama3-8b", gpu="4090", seq_len=2048, setting=SettingOptions(method="full"))
    planned, _, _ = plan_from_options(options)
    setting = planned.setting
    assert setting.optimizer_in_backward and setting.optimizer == "paged-adamw-8bit" and setting.precision == "bf16"
    tiny = planned.model_copy(
        update={
            "model": tiny_model_spec(tiny_model_dir),
            "model_source": str(tiny_model_dir),
            "workload": planned.workload.model_copy(update={"seq_len": 32}),
            "setting": setting.model_copy(update={"compile": False}),
        }
    )
    path = save_plan(tiny, tmp_path / "plan.yaml")
    data = write_jsonl(tmp_path / "text.jsonl", text_rows())
    out = tmp_path / "run"
    launched = run_command([*AUTOTUNE, "launch", *core_args(path, data, out, 4)[1:]], timeout_s=600)
    assert launched.returncode == 0, launched.stderr[-3000:]
    report = read_report(out)
    assert report.status == "completed" and report.steps == 4
    assert report.setting == setting.model_copy(update={"compile": False})
