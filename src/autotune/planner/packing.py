"""The packing choice for a dataset plan: packed blocks or padded rows, whichever finishes the whole run first.

Both layouts train on the same examples (the core packs them whole: ``autotune.schemas.packing``), so the one rule is
the planner's usual one for a choice with no effect on what is learned — time: the whole run's predicted time
(``Estimate.total_time_s``, every epoch's optimizer steps plus compilation). Packed wins ties.
"""

from __future__ import annotations

from collections.abc import Mapping

from autotune.errors import InfeasibleError
from autotune.schemas.dataset_stats import PACKINGS, Packing


def choose_packing(total_time_s: Mapping[Packing, float | None]) -> Packing:
    """The layout with the shortest whole run; ``None`` = no setting fits that layout; ties go to :data:`PACKINGS`[0].

    Raises:
        InfeasibleError: neither layout has a setting that fits.
    """
    timed = [
        (time_s, PACKINGS.index(packing), packing) for packing, time_s in total_time_s.items() if time_s is not None
    ]
    if not timed:
        raise InfeasibleError("no setting fits with the dataset packed or padded")
    return min(timed)[2]
