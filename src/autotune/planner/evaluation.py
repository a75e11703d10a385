"""The eval loss in the planned workload: the held-out set priced per eval, the training set without it.

``--eval-fraction F`` holds out :func:`autotune.schemas.trainer_options.held_out_rows` of the training file's rows
(``round(rows × F)``, the core's seeded ``train_test_split``), so the training set the steps count shrinks by them:
its sequences (packed blocks or padded examples) shrink by the held-out rows' share, ``round(N × held / rows)``, the
rest train. Without a file (``--num-samples N``) a row is a sequence; with ``--dataset-tokens T`` the held-out share
is ``T × F`` tokens. ``--eval-dataset`` adds its tokens (tokenized as the launch would) and trains on everything.
The held-out set is counted in the workload's sequences (``Workload.eval``'s ``samples``: its tokens ÷
``tokens_per_sequence``, rounded up), which ``costmodel.eval_time`` prices as forward-only micro batches at every
eval ``Workload.num_evals`` schedules.
"""

from __future__ import annotations

import math

from autotune.errors import InvalidRequestError
from autotune.schemas.trainer_options import held_out_rows
from autotune.schemas.workload import EvalSet, Workload


def with_eval(
    workload: Workload,
    *,
    eval_steps: int | None,
    eval_fraction: float | None = None,
    rows: int | None = None,
    eval_tokens: float | None = None,
) -> Workload:
    """``workload`` with its eval set (module docstring) and ``eval_steps`` as ``Workload.eval``.

    Args:
        workload: the training workload over the whole file.
        eval_steps: an eval every N optimizer steps (None: at the end only).
        eval_fraction: ``--eval-fraction`` (held out of the training file).
        rows: the training file's rows (``--dataset``; None: a sequence is a row).
        eval_tokens: the ``--eval-dataset``'s tokens as the layout computes them (blocks × seq_len, or the padded
            examples' real tokens).

    Without a size (no ``num_samples`` nor ``dataset_tokens``) only ``eval_steps`` is recorded: nothing is priced.

    Raises:
        InvalidRequestError: the fraction holds out no row or every row (one line naming ``--eval-fraction``).
    """
    size: dict[str, int] = {}
    samples = workload.eval.samples if workload.eval is not None else None
    per_sequence = workload.tokens_per_sequence
    if eval_fraction is not None and workload.num_samples is not None:
        total_rows = rows if rows is not None else workload.num_samples
        try:
            held = held_out_rows(total_rows, eval_fraction)
        except ValueError as error:
            raise InvalidRequestError(str(error)) from None
        samples = max(1, round(workload.num_samples * held / total_rows))
        # the core splits the rows first and packs each side, so both keep at least one sequence (held_out_rows
        # leaves rows on both sides) even where the share rounds to all of a few blocks
        size["num_samples"] = max(1, workload.num_samples - samples)
    elif eval_fraction is not None and workload.dataset_tokens is not None:
        held_tokens = workload.dataset_tokens * eval_fraction
        size["dataset_tokens"] = max(1, round(workload.dataset_tokens - held_tokens))
        samples = max(1, math.ceil(held_tokens / per_sequence))
    elif eval_tokens is not None and workload.total_samples is not None:
        samples = max(1, math.ceil(eval_tokens / per_sequence))
    evaluation = EvalSet(samples=samples, steps=eval_steps) if samples is not None or eval_steps is not None else None
    return Workload.model_validate({**workload.model_dump(), **size, "eval": evaluation})
