"""The searches of one process, remembered: a request searched again gets the first search's outcome.

A search is a pure function of its request (the model, the cluster, the workload, the forced choices and the
coefficients are all in it: ``PlanRequest``), so its outcome — the :class:`~autotune.planner.search.PlanResult` or the
error that refused it — can be kept. The same searches recur within one answer: every refused cell of a sweep asks
the nearest setting without the forced method and the lever hint's smaller global batches, which are the same requests
for every method at one sequence length; a grid's plan file re-plans its chosen row; a notebook or a sweep script
calling :func:`autotune.plan` twice asks twice. The key is the request's JSON (``model_dump_json``: ~30 µs beside a
search's 0.1–0.5 s) with the search's options; the newest :data:`MAX_SEARCHES` outcomes are kept (each is the
chosen setting, its runner-ups and the refusal lines: kilobytes, not the ~6 MB of a search's candidates).
:func:`forget_searches` empties it (a test that patches the cost model does, ``tests/conftest.py``).

A search's candidates, estimated (``search.evaluate_candidates``), are kept too, for the newest
:data:`MAX_EVALUATIONS` requests only (:func:`evaluated`; 3–6 MB each): a sweep's cell estimates its candidates, then
searches, and the search takes them from here (``sweep.plan_cell``: a refused cell names the closest of them).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import TypeVar

from autotune.errors import AutotuneError

T = TypeVar("T")

MAX_SEARCHES = 256
"""Outcomes kept per process (least recently used dropped first): a sweep of 6 lengths × 3 methods with its refusals'
searches, or a 12 × 4 grid, fits many times over."""

MAX_EVALUATIONS = 2
"""Requests whose estimated candidates are kept (:func:`evaluated`; 3–6 MB each: 480–900 candidates of ~6 kB): a
sweep's cell asks for its list just before its search does."""

_OUTCOMES: OrderedDict[str, object] = OrderedDict()
_EVALUATIONS: OrderedDict[str, object] = OrderedDict()


def _kept(store: OrderedDict[str, object], limit: int, key: str, compute: Callable[[], T]) -> T:
    """``compute()``'s outcome for ``key``: computed once, then from ``store`` (the newest ``limit`` kept).

    An :class:`~autotune.errors.AutotuneError` is an outcome: kept, and raised again each time as a new error of the
    same class and message. Any other exception propagates and nothing is kept.
    """
    if key in store:
        store.move_to_end(key)
        outcome = store[key]
    else:
        try:
            outcome = compute()
        except AutotuneError as error:
            outcome = error
        store[key] = outcome
        if len(store) > limit:
            store.popitem(last=False)
    if isinstance(outcome, AutotuneError):
        raise type(outcome)(*outcome.args)
    return outcome  # type: ignore[return-value]  # the key's computation returned it


def remembered(key: str, search: Callable[[], T]) -> T:
    """``search()``'s outcome for ``key``: computed once, then returned (or its refusal raised again) from memory.

    The newest :data:`MAX_SEARCHES` are kept (:func:`_kept`).
    """
    return _kept(_OUTCOMES, MAX_SEARCHES, key, search)


def evaluated(key: str, evaluate: Callable[[], T]) -> T:
    """``evaluate()``'s result for ``key`` (a request's estimated candidates, an immutable tuple), computed once.

    The newest :data:`MAX_EVALUATIONS` are kept (:func:`_kept`).
    """
    return _kept(_EVALUATIONS, MAX_EVALUATIONS, key, evaluate)


def forget_searches() -> None:
    """Drop every remembered outcome and estimated candidate list (the next search of each request searches again)."""
    _OUTCOMES.clear()
    _EVALUATIONS.clear()
