"""One plan from a request's options: the dataset tokenized into its workload, the search, the notes, the JSON.

``plan`` on the command line and :func:`autotune.api.plan` take the same two steps: :func:`prepare` (the eval options
checked, ``--dataset`` tokenized into packed or padded batches, the eval set tokenized) and :func:`plan_prepared`
(the search on one GPU type and count, both layouts with ``packing: auto``). Between them the command line may instead
plan a table of GPU types × counts (:mod:`autotune.session.gpu_grid`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from autotune.errors import InvalidRequestError
from autotune.planner.search import PlanResult
from autotune.schemas.dataset_stats import DEFAULT_MAX_ROWS, DatasetStats
from autotune.schemas.plan import PlanFile
from autotune.session.dataset_lengths import dataset_workload, tokenizer_source
from autotune.session.dataset_plan import plan_dataset, with_eval_data
from autotune.session.planning import PlanOptions, plan_from_options
from autotune.session.resolve import eval_data


@dataclass(frozen=True)
class PlanOutcome:
    """A plan: the plan file (what ``-o`` writes and ``launch`` runs), the search behind it and the notes."""

    plan_file: PlanFile
    result: PlanResult
    notes: list[str]

    def astuple(self) -> tuple[PlanFile, PlanResult, list[str]]:
        """(plan file, search result, notes)."""
        return self.plan_file, self.result, self.notes

    def json_dict(self) -> dict[str, Any]:
        """What ``autotune plan --json`` prints: the chosen setting and prediction, runner-ups, rejections, notes.

        Keys: ``plan`` (the setting and its prediction's fields), ``alternatives`` (each with ``why_not_chosen``),
        ``rejected``, ``notes``, ``searched`` (settings evaluated) and ``plan_file`` (the whole plan file).
        """
        data = self.plan_file.model_dump(mode="json")
        return {
            "plan": {"setting": data["setting"], **data["prediction"]},
            "alternatives": [
                {"setting": a["setting"], "why_not_chosen": a["why_not_chosen"], **a["prediction"]}
                for a in data["alternatives"]
            ],
            "rejected": data["rejected"],
            "notes": self.notes,
            "searched": self.result.searched,
            "plan_file": data,
        }


def prepare(options: PlanOptions) -> tuple[PlanOptions, DatasetStats | None, list[str]]:
    """``options`` with their dataset's workload and eval set priced; the dataset's statistics; its notes.

    Raises:
        AutotuneError: bad eval options (before any tokenizing), or what tokenizing the dataset or eval set refuses.
    """
    eval_data(options.eval_dataset, options.eval_fraction, options.eval_steps)
    options, stats, notes = dataset_workload(options)
    return with_eval_data(options, stats), stats, notes


def plan_prepared(options: PlanOptions, stats: DatasetStats | None, dataset_notes: list[str]) -> PlanOutcome:
    """Search ``options`` (one GPU type and count) prepared by :func:`prepare`: the best setting that fits.

    Raises:
        InfeasibleError: nothing fits (the message names the nearest setting and why).
        AutotuneError: an invalid request (one line naming the option).
    """
    if stats is not None:
        plan_file, result, notes = plan_dataset(options, stats)
        return PlanOutcome(plan_file, result, dataset_notes + notes)
    plan_file, result, notes = plan_from_options(options)
    return PlanOutcome(plan_file, result, notes)


def plan_on_data(options: PlanOptions) -> PlanOutcome:
    """Plan ``options`` on one GPU type and count as ``autotune plan`` does, ``--dataset`` and eval set included.

    ``autotune launch MODEL --dataset D`` and :func:`autotune.api.plan` plan through here, so their plan is ``plan``'s.

    Raises:
        AutotuneError: what :func:`prepare` and :func:`plan_prepared` refuse.
    """
    return plan_prepared(*prepare(options))


def data_plannable(options: PlanOptions) -> bool:
    """Whether ``launch MODEL`` plans on its ``--dataset``: MODEL has a tokenizer here, or a data option asks for it.

    ``--tokenizer``, ``--packing`` other than auto or ``--max-rows`` given: always (a missing tokenizer is then
    refused in one line, as by ``plan --dataset``). Otherwise only when MODEL names a tokenizer
    (:func:`autotune.session.dataset_lengths.tokenizer_source`): a catalog name has none, and its launch plans
    without the data's lengths, with a note.
    """
    if options.tokenizer or options.packing != "auto" or options.max_rows != DEFAULT_MAX_ROWS:
        return True
    try:
        tokenizer_source(options.model, None)
    except InvalidRequestError:
        return False
    return True
