"""The note that says when sdpa runs its masked path on the user's data, and what flash_attention_2 would take.

Packed blocks of several examples and padded micro batches of unequal rows give SDPA an explicit mask
(``costmodel.context.masked_attention_share``): transformers then repeats K / V per query head and drops
``is_causal``, and torch's flash backend refuses the mask, so the memory-efficient kernel runs over every score.
``attention_impl: flash_attention_2`` keeps a flash kernel there (flash-attn's varlen kernel over the flattened
packed rows, ``schemas.packing.PACKED_LAYOUTS``). The planner does not search attention implementations (flash-attn
is a separate CUDA package the user installs), so where the data makes the difference the plan says so.
"""

from __future__ import annotations

from autotune.costmodel.context import has_flash_attention_2, masked_attention_share
from autotune.costmodel.estimate import estimate_setting
from autotune.schemas.calibration import CostCoefficients
from autotune.schemas.hardware import ClusterSpec
from autotune.schemas.model import ModelSpec
from autotune.schemas.setting import TrainingSetting
from autotune.schemas.workload import Workload

NOTED_SPEEDUP = 0.05
"""The least step-time saving (5 %) worth a note: smaller ones sit inside the time band of any plan."""


def masked_attention_notes(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: Workload,
    setting: TrainingSetting,
    coefficients: CostCoefficients,
    step_time_s: float,
) -> list[str]:
    """``[note]`` when ``setting`` runs sdpa's masked path on some micro batches and flash_attention_2 is ≥ 5 % faster.

    ``step_time_s``: the setting's own predicted step (the caller's estimate, seconds); the other figure is the cost
    model's for the same setting and workload with only ``attention_impl`` changed
    (:func:`~autotune.costmodel.estimate.estimate_setting`). Empty for other implementations, GPUs without
    FlashAttention-2 (``costmodel.context.has_flash_attention_2``: before Ampere flash-attn 2 does not run), or
    workloads without masks (the synthetic one: every sequence full, one per row).
    """
    share = masked_attention_share(setting, cluster.gpu, workload)
    if share <= 0 or not has_flash_attention_2(cluster.gpu):  # flash-attn 2 needs Ampere or newer
        return []
    flash = setting.model_copy(update={"attention_impl": "flash_attention_2"})
    faster = estimate_setting(model, cluster, workload, flash, coefficients)
    saving = 1 - faster.step_time_s / step_time_s
    if saving < NOTED_SPEEDUP:
        return []
    return [
        f"attention: {share:.0%} of the micro batches give sdpa a mask (packed blocks of several examples or padded "
        "rows of unequal length), so it runs the memory-efficient kernel over every score; --attention-impl "
        f"flash_attention_2 (the flash-attn package, CUDA) keeps a flash kernel: step {step_time_s:.3g} s → "
        f"{faster.step_time_s:.3g} s ({saving:.0%} less)"
    ]
