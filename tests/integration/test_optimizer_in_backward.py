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

from pathlib import Path

import pytest
from trainer_helpers import unclipped_losses

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
