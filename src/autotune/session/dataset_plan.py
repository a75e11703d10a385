"""``plan --dataset``: plan the user's data packed and padded (``--packing auto``), keep the faster whole run.

The layouts' workloads come from :func:`autotune.session.dataset_lengths.with_packing`; the choice is
:func:`autotune.planner.packing.choose_packing` (the whole run's predicted time). The plan file records the layout in
``dataset.packing``, and ``autotune launch`` batches the data that way (the workload's ``batches``: padded or not).
"""

from __future__ import annotations

from dataclasses import replace

from autotune.errors import InfeasibleError
from autotune.planner.packing import choose_packing
from autotune.planner.search import PlanResult
from autotune.schemas.dataset_stats import DatasetStats, Packing
from autotune.schemas.plan import PlanFile
from autotune.session.dataset_lengths import (
    dataset_samples,
    packing_choice_note,
    packing_layouts,
    packing_note,
    with_packing,
)
from autotune.session.planning import PlanOptions, plan_from_options


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


def with_eval_data(options: PlanOptions, stats: DatasetStats | None) -> PlanOptions:
    """``options`` with what pricing their eval set needs: the ``--dataset``'s rows, the ``--eval-dataset`` tokenized.

    ``stats``: the ``--dataset``'s (None without one). The eval file is tokenized as the launch would
    (:func:`autotune.session.dataset_lengths.dataset_samples`, the training file's loader, at ``options.seq_len``) only
    when the run has a size to price (``--dataset``, ``--num-samples`` or ``--dataset-tokens``).

    Raises:
        AutotuneError: what :func:`~autotune.session.dataset_lengths.dataset_samples` refuses for the eval file.
    """
    rows = stats.rows_total if stats is not None else None
    sized = stats is not None or options.num_samples is not None or options.dataset_tokens is not None
    eval_stats = None
    if options.eval_dataset is not None and sized:
        eval_stats = eval_dataset_stats(
            options.model, options.eval_dataset, options.tokenizer, options.dataset_format, options.max_rows,
            options.seq_len,
        )  # fmt: skip
    return replace(options, dataset_rows=rows, eval_stats=eval_stats)


def eval_dataset_stats(
    model: str, eval_dataset: str, tokenizer: str | None, dataset_format: str, max_rows: int, seq_len: int
) -> DatasetStats:
    """``--eval-dataset`` tokenized as the launch would, at ``seq_len`` (the training file's loader).

    Raises:
        AutotuneError: what :func:`autotune.session.dataset_lengths.dataset_samples` refuses.
    """
    _, stats, _ = dataset_samples(model, eval_dataset, tokenizer, dataset_format, max_rows, seq_len, False)
    return stats
