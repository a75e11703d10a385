"""The levers' losses against the standard path's on the tiny model (CPU): the measured deviations, step by step.

Runs the training core (``python -m autotune.trainer``) for 20 steps of full fine-tuning of the integration tests'
2-layer Llama (micro batch 2, no accumulation, clipping out of reach) in pairs — the Trainer's optimizer and the same
optimizer stepped inside the backward (fp32 AdamW, pure bf16 AdamW, fp32 8-bit AdamW), and 8-bit AdamW against the
paged one in the backward — and prints each pair's largest relative deviation of a step's loss, beside the tolerance
``tests/integration/test_optimizer_in_backward.py`` derives and asserts.

    python benchmarks/lever_losses.py          # about 6 core runs of 20 steps (a few minutes on 2 cores)
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "integration"))

from tests.integration.test_optimizer_in_backward import STEPS, TOLERANCE_CASES  # noqa: E402
from tests.integration.trainer_helpers import save_tiny_model, unclipped_losses  # noqa: E402


def deviation(losses: list[float], reference: list[float]) -> float:
    """The largest |loss − reference| / |reference| over the steps."""
    return max(abs(a - b) / abs(b) for a, b in zip(losses, reference, strict=True))


def main() -> None:
    """Run the pairs and print one line each."""
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        model = save_tiny_model(work / "tiny")
        cases = [(f"{precision} {optimizer}", {"precision": precision, "optimizer": optimizer},
                  {"precision": precision, "optimizer": optimizer, "optimizer_in_backward": True}, rel)
                 for precision, optimizer, rel in TOLERANCE_CASES]  # fmt: skip
        levers = {"loss_impl": "chunked", "grad_ckpt": True}  # the 4090 full plan's levers, all at once
        cases.append(("fp32 8-bit vs paged in backward", {"optimizer": "adamw-8bit", **levers},
                      {"optimizer": "paged-adamw-8bit", "optimizer_in_backward": True, **levers}, 1e-5))  # fmt: skip
        for number, (label, standard_fields, lever_fields, rel) in enumerate(cases):
            standard = unclipped_losses(model, work, f"standard-{number}", STEPS, **standard_fields)
            lever = unclipped_losses(model, work, f"lever-{number}", STEPS, **lever_fields)
            print(
                f"{label:34s} max rel deviation {deviation(lever, standard):.2e} (tolerance {rel:g}); loss "
                f"{standard[0]:.4f} -> {standard[-1]:.4f} (standard), {lever[0]:.4f} -> {lever[-1]:.4f} (lever)",
                flush=True,
            )


if __name__ == "__main__":
    main()
