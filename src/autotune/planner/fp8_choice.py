"""FP8 linears in the search: offered where public FP8 figures back the card, kept only where predicted ≥ 5 % faster.

The time of an FP8 setting is the public figures' (``costmodel.fp8_time``: torchao's float8 benchmarks, not measured
by our core; its band is widened by ``FP8_BAND_WIDENING``), and FP8 trades precision (E4M3 keeps 3 mantissa bits;
torchao's README: "these recipes are different points on the accuracy vs performance curve"). So an unasked FP8
setting must beat the same setting in bf16 by :data:`FP8_MIN_GAIN` of the run time, the margin issue 44 sets ("chosen
only where it is predicted ≥ 5 % faster"), or it is not a candidate. It is offered unasked only where the core can
run it from this install (torchao importable: the optional extra ``.[fp8]``; ``autotune launch`` refuses an FP8 plan
without it), as liger's kernels are; ``--fp8`` / ``--no-fp8`` decide it outright.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING

from autotune.costmodel.fp8_time import FP8_PUBLIC_GENERATIONS
from autotune.planner.request import PlanRequest
from autotune.schemas.setting import fp8_error, fp8_installed

if TYPE_CHECKING:
    from autotune.planner.search import Scored

FP8_MIN_GAIN = 0.05
"""The fraction of the run time an unasked FP8 setting must save over its bf16 twin to stay a candidate."""


def fp8_choices(request: PlanRequest, method: str) -> tuple[bool, ...]:
    """Whether the linears run in FP8: the forced value, else both where they can and public figures back it.

    Both where the card and method allow FP8, public FP8 figures exist for the card's generation
    (``costmodel.fp8_time.FP8_PUBLIC_GENERATIONS``) and torchao is installed (:func:`torchao_installed`); else bf16.
    """
    forced = request.overrides.fp8
    if forced is not None:
        return (forced,)
    gpu = request.cluster.gpu
    runs = fp8_error(True, method, gpu.name, gpu.vendor, gpu.generation) is None
    offered = runs and gpu.generation in FP8_PUBLIC_GENERATIONS and torchao_installed()
    return (False, True) if offered else (False,)


@functools.lru_cache(maxsize=1)
def torchao_installed() -> bool:
    """Whether torchao can be imported here (``schemas.setting.fp8_installed``: found, not imported), asked once."""
    return fp8_installed()


def where_fp8_pays(scored: Sequence[Scored], request: PlanRequest) -> list[Scored]:
    """``scored`` without the unasked FP8 settings that are not :data:`FP8_MIN_GAIN` faster than their bf16 twin."""
    if request.overrides.fp8 is not None:
        return list(scored)
    bf16_run_s = {s.setting: s.run_time_s for s in scored if not s.setting.fp8}
    kept = []
    for s in scored:
        twin_s = bf16_run_s.get(s.setting.model_copy(update={"fp8": False})) if s.setting.fp8 else None
        if twin_s is None or s.run_time_s <= (1 - FP8_MIN_GAIN) * twin_s:
            kept.append(s)
    return kept
