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

_OUTCOMES: OrderedDict[str, object] = OrderedDict()


def remembered(key: str, search: Callable[[], T]) -> T:
    """``search()``'s outcome for ``key``: computed once, then returned (or its error raised again) from memory.

    Only :class:`~autotune.errors.AutotuneError` refusals are kept (raised again as a new error of the same class and
    message); any other exception propagates and nothing is kept.
    """
    if key in _OUTCOMES:
        _OUTCOMES.move_to_end(key)
        outcome = _OUTCOMES[key]
    else:
        try:
            outcome = search()
        except AutotuneError as error:
            outcome = error
        _OUTCOMES[key] = outcome
        if len(_OUTCOMES) > MAX_SEARCHES:
            _OUTCOMES.popitem(last=False)
    if isinstance(outcome, AutotuneError):
        raise type(outcome)(*outcome.args)
    return outcome  # type: ignore[return-value]  # the key's search returned it


def forget_searches() -> None:
    """Drop every remembered outcome (the next search of each request searches again)."""
    _OUTCOMES.clear()
