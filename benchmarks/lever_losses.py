"""The levers' losses against the standard path's on the tiny model (CPU): the measured deviations, step by step.

Runs the training core (``python -m autotune.trainer``) for 20 steps of full fine-tuning of the integration tests'
2-layer Llama (micro batch 2, no accumulation, clipping out of reach) in pairs — the Trainer's optimizer and the same
optimizer stepped inside the backward (fp32 AdamW, pure bf16 AdamW, fp32 8-bit AdamW), and 8-bit AdamW against the
paged one in the backward — and prints each pair's largest relative deviation of a step's loss, beside the tolerance
``tests/integration/test_optimizer_in_backward.py`` derives and asserts. ``--cases rounding-offload``: pure bf16 with
torchao's stochastic rounding (when torchao is installed) and with round-to-nearest against bf16-mixed, and the
offloaded activations against the plain run (``tests/integration/test_rounding_offload_losses.py``'s tolerances).

    python benchmarks/lever_losses.py          # about 6 core runs of 20 steps (a few minutes on 2 cores)
    python benchmarks/lever_losses.py --cases rounding-offload
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "integration"))

from tests.integration.test_optimizer_in_backward import STEPS, TOLERANCE_CASES  # noqa: E402
from tests.integration.test_rounding_offload_losses import ROUNDING_TOLERANCE  # noqa: E402
from tests.integration.trainer_helpers import save_tiny_model, unclipped_losses  # noqa: E402

Case = tuple[str, dict[str, object], dict[str, object], float]


def deviation(losses: list[float], reference: list[float]) -> float:
    """The largest |loss − reference| / |reference| over the steps."""
    return max(abs(a - b) / abs(b) for a, b in zip(losses, reference, strict=True))


def rounding_offload_cases() -> list[Case]:
    """bf16 stochastic rounding (if torchao is installed) and round-to-nearest vs bf16-mixed; offloaded vs plain."""
    mixed = {"precision": "bf16-mixed"}
    cases: list[Case] = []
    if importlib.util.find_spec("torchao") is not None:
        rounded = {"precision": "bf16", "bf16_stochastic_rounding": True}
        cases.append(("bf16-mixed vs bf16 stochastic round", mixed, rounded, ROUNDING_TOLERANCE))
    cases.append(("bf16-mixed vs bf16 round-to-nearest", mixed, {"precision": "bf16"}, ROUNDING_TOLERANCE))
    plain = {"precision": "bf16", "grad_ckpt": False}
    cases.append(("bf16 vs offloaded activations", plain, {**plain, "activation_offloading": True}, 1e-6))
    return cases


def main() -> None:
    """Run the pairs and print one line each."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", choices=("all", "in-backward", "rounding-offload"), default="all")
    chosen = parser.parse_args().cases
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        model = save_tiny_model(work / "tiny")
        cases: list[Case] = [(f"{precision} {optimizer}", {"precision": precision, "optimizer": optimizer},
                  {"precision": precision, "optimizer": optimizer, "optimizer_in_backward": True}, rel)
                 for precision, optimizer, rel in TOLERANCE_CASES]  # fmt: skip
        levers = {"loss_impl": "chunked", "grad_ckpt": True}  # the 4090 full plan's levers, all at once
        cases.append(("fp32 8-bit vs paged in backward", {"optimizer": "adamw-8bit", **levers},
                      {"optimizer": "paged-adamw-8bit", "optimizer_in_backward": True, **levers}, 1e-5))  # fmt: skip
        if chosen == "rounding-offload":
            cases = []
        if chosen != "in-backward":
            cases += rounding_offload_cases()
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
