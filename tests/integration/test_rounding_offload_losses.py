"""bf16 stochastic rounding and activation offloading: the core's losses against the standard path's, 20 steps.

Offloading (``activation_offloading``): on the CPU the pack hook copies each saved tensor to a new host tensor and the
unpack hook returns it (``trainer.activation_offload``): the backward reads the same values, so the losses are equal
(bit for bit; the comparison allows 1e-6 relative for nothing but the float formatting of the report).

Stochastic rounding (``bf16_stochastic_rounding``) against the standard mixed-precision path (``bf16-mixed``: fp32
master weights, bf16 autocast), tolerance derived from bf16's unit roundoff u = 2^-8 (8 significant bits):
pure bf16 stores each weight rounded (relative error ≤ u), keeps the residual stream and the moments in bf16, and
rounds each update stochastically (unbiased, error ≤ 2u per element and step, zero in expectation). The loss is a
smooth function of the weights; each step's loss is perturbed by the weights' rounding (relative ≤ u in every
logit, so ≤ u × the loss's scale, the loss itself at this size) and by the bf16 activations (the same rounding the
mixed path's autocast matmuls already do, plus the residual stream's: another u). The stochastic updates' errors
add as a random walk over 20 steps (√20 · u relative to one step's update, which the learning rate keeps below the
weights' scale): together 2u + √20 · u ≈ 6.5u ≈ 2.5 % of the loss. The tolerance is 8u ≈ 3.1 % per step, relative.
Without stochastic rounding (round to nearest) updates below u·|w| are lost, a bias rather than noise: the check that
the lever does something prints both deviations (``benchmarks/lever_losses.py`` style) but asserts only the lever's.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from trainer_helpers import unclipped_losses

STEPS = 20
BF16_UNIT_ROUNDOFF = 2.0**-8
ROUNDING_TOLERANCE = 8 * BF16_UNIT_ROUNDOFF
"""Relative tolerance of each step's loss, pure bf16 with stochastic rounding vs bf16-mixed (module docstring)."""


@pytest.mark.slow
def test_offloading_gives_the_plain_losses(tiny_model_dir: Path, tmp_path: Path) -> None:
    """20 steps of the tiny model without checkpointing: offloaded activations, the same losses."""
    shared = {"precision": "bf16", "grad_ckpt": False}
    plain = unclipped_losses(tiny_model_dir, tmp_path, "plain", STEPS, **shared)
    offloaded = unclipped_losses(tiny_model_dir, tmp_path, "offloaded", STEPS, activation_offloading=True, **shared)
    assert offloaded == pytest.approx(plain, rel=1e-6)
    assert offloaded[-1] < offloaded[0]  # it trains


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("torchao") is None,
    reason="torchao is not installed (the optional extra .[fp8]); the refusal is tested in tests/unit/trainer",
)
def test_stochastic_rounding_tracks_mixed_precision(tiny_model_dir: Path, tmp_path: Path) -> None:
    """20 steps: pure bf16 with torchao's stochastic rounding within 8u of the fp32-master path's loss, each step."""
    mixed = unclipped_losses(tiny_model_dir, tmp_path, "mixed", STEPS, precision="bf16-mixed")
    rounded = unclipped_losses(
        tiny_model_dir, tmp_path, "rounded", STEPS, precision="bf16", bf16_stochastic_rounding=True
    )
    deviations = [abs(r / m - 1) for r, m in zip(rounded, mixed, strict=True)]
    assert max(deviations) <= ROUNDING_TOLERANCE, f"per-step relative deviations: {deviations}"
    assert rounded[-1] < rounded[0]  # it trains
