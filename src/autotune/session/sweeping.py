"""The requests of ``sweep``'s cells (method × sequence length), and the notes they carry.

:class:`SweepRequests` is what :func:`autotune.planner.sweep.sweep` calls per cell: the request's options with the
cell's method and sequence length, and with ``--dataset`` the data's layouts at that length (tokenized once, see
:func:`autotune.session.dataset_lengths.dataset_workload`), exactly as ``plan --dataset`` would plan that cell.
"""

from __future__ import annotations

from autotune.planner.request import PlanRequest
from autotune.planner.sweep import CellRequest, SweepResult
from autotune.session.dataset_lengths import dataset_workload, packing_layouts, with_packing
from autotune.session.planning import PlanOptions, request_from_options
from autotune.session.resolve import host_memory_note


class SweepRequests:
    """Each cell's request (one per layout with a dataset), collecting the notes once each."""

    def __init__(self, options: PlanOptions) -> None:
        """Cells of ``options`` (the cell's method and sequence length replace the options')."""
        self.options = options
        self.notes: list[str] = []
        self._last: PlanRequest | None = None

    def _request(self, cell_options: PlanOptions) -> PlanRequest:
        request, request_notes = request_from_options(cell_options)
        self.notes.extend(note for note in request_notes if note not in self.notes)
        self._last = request
        return request

    def __call__(self, method: str, length: int) -> CellRequest:
        """The request of the cell ``method`` × ``length`` (with a dataset: per packing layout).

        Raises:
            AutotuneError: an invalid request, or what tokenizing the dataset refuses (one line).
        """
        cell_options = self.options.with_method(method, length)
        if self.options.dataset is None:
            return self._request(cell_options)
        cell_options, stats, dataset_notes = dataset_workload(cell_options)
        self.notes.extend(note for note in dataset_notes if note not in self.notes)
        assert stats is not None
        layouts = packing_layouts(self.options.packing)
        return {layout: self._request(with_packing(cell_options, stats, layout)) for layout in layouts}

    def closing_notes(self, result: SweepResult) -> list[str]:
        """The notes of every cell, then the host-memory note over the settings the sweep chose or came closest to."""
        if self._last is None:
            return self.notes
        settings = [s for cell in result.cells for s in (cell.setting, cell.closest_setting) if s is not None]
        return self.notes + host_memory_note(self._last.cluster, self.options.host_memory_gib, settings)
