"""``plan --dataset``: plan the user's data packed and padded (``--packing auto``), keep the faster whole run.

The layouts' workloads come from :func:`autotune.cli.dataset_lengths.with_packing`; the choice is
:func:`autotune.planner.packing.choose_packing` (the whole run's predicted time). The plan file records the layout in
``dataset.packing``, and ``autotune launch`` batches the data that way (``Workload.tokens_per_sample`` set: padded).
"""

from __future__ import annotations

from autotune.cli.dataset_lengths import packing_choice_note, packing_layouts, packing_note, with_packing
from autotune.cli.planning import PlanOptions, plan_from_options
from autotune.errors import InfeasibleError
from autotune.planner.packing import choose_packing
from autotune.planner.search import PlanResult
from autotune.schemas.dataset_stats import DatasetStats, Packing
from autotune.schemas.plan import PlanFile


def plan_dataset(options: PlanOptions, stats: DatasetStats) -> tuple[PlanFile, PlanResult, list[str]]:
    """Plan ``options`` on ``stats``'s examples: as ``options.packing`` says, or both layouts for ``auto``.

    Returns the chosen layout's plan file (its ``dataset`` is ``stats`` with the layout), search result and notes: the
    layout's workload, and with ``auto`` both whole runs' times and why one was kept.

    Raises:
        InfeasibleError: no setting fits the layout asked for (``auto``: neither layout).
    """
    layouts = packing_layouts(options.packing)
    planned: dict[Packing, tuple[PlanFile, PlanResult, list[str]]] = {}
    refusals: dict[Packing, InfeasibleError] = {}
    for layout in layouts:
        try:
            planned[layout] = plan_from_options(with_packing(options, stats, layout))
        except InfeasibleError as error:
            if len(layouts) == 1:
                raise
            refusals[layout] = error
    times = {layout: planned[layout][0].prediction.total_time_s if layout in planned else None for layout in layouts}
    if not planned:
        raise next(iter(refusals.values()))
    chosen = choose_packing(times)
    plan_file, result, notes = planned[chosen]
    notes = [packing_note(stats, chosen), *notes]
    if len(layouts) > 1:
        notes.insert(0, packing_choice_note(chosen, times, "plan"))
    dataset = stats.model_copy(update={"packing": chosen})
    return plan_file.model_copy(update={"dataset": dataset}), result, notes
