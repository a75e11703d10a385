"""Pure bf16 against mixed precision for full fine-tuning: which the search offers, how quality ranks them, the note.

Pure bf16 (``precision: bf16``) holds the weights, gradients and AdamW moments in bf16 with no fp32 master copy
(2 + 2 + 4 bytes per parameter against mixed precision's 4 + 4 + 8: ``costmodel.precision.dtype_bytes``); torchtune's
single-device full recipes train so (``dtype: bf16``). What it trades: every update is rounded to bf16's 8-bit
significand, and "nearest rounding for model weight updates often cancels small updates, which degrades the
convergence and model accuracy" (Zamirai et al. 2020, "Revisiting BFloat16 Training", arXiv 2010.06192, abstract;
stochastic rounding or Kahan summation of the update recovers 32-bit accuracy there). Mixed precision
(``bf16-mixed``: fp32 weights and states, bf16 autocast) keeps the update in fp32. So under ``--objective quality``
pure bf16 ranks after mixed precision where both fit (:func:`precision_rank`, an element of
``planner.search.rank_key``), and the plan says what the chosen precision trades (:func:`precision_note`).

Only full fine-tuning has the choice: an adapter method's trained weights are its adapters (``adapter_dtype``), and
DeepSpeed's 16-bit engine keeps an fp32 master copy in its optimizer whichever 16-bit precision is asked
(``costmodel.precision``), so it is offered once there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from autotune.schemas.setting import ZERO_SHARDINGS, Precision, Sharding, TrainingSetting

if TYPE_CHECKING:
    from autotune.planner.search import Scored

PURE_BF16: Precision = "bf16"
MIXED_BF16: Precision = "bf16-mixed"


def precision_choices(default: Precision, method: str, sharding: Sharding) -> tuple[Precision, ...]:
    """The precisions searched when none is forced.

    Pure bf16 and bf16 mixed precision for full fine-tuning outside DeepSpeed, else ``default`` alone
    (``schemas.setting.default_precision``: pure bf16, fp16 mixed without bf16).
    """
    if default == PURE_BF16 and method == "full" and sharding not in ZERO_SHARDINGS:
        return (PURE_BF16, MIXED_BF16)
    return (default,)


def without_master_copy(setting: TrainingSetting) -> bool:
    """Whether a full fine-tune's weights are updated in bf16 with no fp32 master copy (pure bf16 outside DeepSpeed)."""
    return setting.method == "full" and setting.precision == PURE_BF16 and setting.sharding not in ZERO_SHARDINGS


def precision_rank(setting: TrainingSetting) -> int:
    """Quality's order of the precisions the search offers (smaller is better): 1 for a full fine-tune's ``bf16``.

    By the precision field, which is what the planner varies (:func:`precision_choices`): a forced ``--precision``
    ranks every candidate alike, so the rest of the order (sharding, speed) decides as before.
    """
    return int(setting.method == "full" and setting.precision == PURE_BF16)


def precision_note(chosen: Scored, fitting: list[Scored], objective: str, forced: bool) -> str | None:
    """One note of what the chosen full fine-tune's precision trades, or None (an adapter method, or ``forced``).

    Pure bf16 chosen: what it gives up, and whether fp32 master weights fit. bf16-mixed chosen while a pure bf16
    setting also fits: the time the better update costs. None under DeepSpeed (its engine keeps fp32 master weights).
    """
    setting = chosen.setting
    if forced or setting.method != "full" or setting.sharding in ZERO_SHARDINGS:
        return None
    other = [s for s in fitting if s.setting.method == "full" and precision_rank(s.setting) != precision_rank(setting)]
    if without_master_copy(setting):
        why = (
            f"--objective {objective} chose it over bf16-mixed, which also fits"
            if other
            else "no bf16-mixed full fine-tune (fp32 master weights) fits"
        )
        return (
            "precision: pure bf16 weights and AdamW states, no fp32 master copy — each update is rounded to bf16 "
            "(8 significant bits), which cancels updates much smaller than the weight (Zamirai et al. 2020) — for "
            f"half the model-state memory; {why}. --precision bf16-mixed asks for fp32 master weights"
        )
    if not other:
        return None
    pure = min(other, key=lambda s: s.run_time_s)
    ratio = pure.run_time_s / chosen.run_time_s
    return (
        f"precision: fp32 master weights ({setting.precision}) rank before pure bf16 under "
        f"quality: each update keeps fp32's precision; pure bf16 also fits and would take {ratio:.2f}× the "
        f"time ({pure.setting.short()}; --precision bf16 --sharding {pure.setting.sharding}, or --objective speed)"
    )
