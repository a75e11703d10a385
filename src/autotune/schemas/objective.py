"""The objectives a plan is chosen by: the one list, read by the planner, the plan file, the table and the CLI.

Within one GPU type and count the planner ranks settings by ``quality`` (full > LoRA > QLoRA, then the fastest),
``speed`` or ``memory`` (:mod:`autotune.planner.search`); a table of GPU types × counts adds ``time`` (the shortest
run) and ``cost`` (the cheapest), which choose a row and inside a cell rank settings by ``speed``
(:mod:`autotune.planner.grid`).
"""

from __future__ import annotations

from typing import Literal, get_args

Objective = Literal["quality", "speed", "memory"]
"""What the planner optimizes within one GPU type and count (a plan file's ``objective``)."""

TableObjective = Literal["time", "cost"]
"""The objectives only a table of GPU types × counts has (they compare whole runs across cells)."""

GridObjective = Literal[Objective, TableObjective]
"""Every objective the table takes: the planner's and the table's own."""

GRID_OBJECTIVES: tuple[str, ...] = get_args(GridObjective)
"""``('quality', 'speed', 'memory', 'time', 'cost')``: what ``autotune plan --objective`` accepts, in this order."""

TABLE_OBJECTIVES: frozenset[str] = frozenset(get_args(TableObjective))
"""``{'time', 'cost'}``: an ``--objective`` that asks for the table (and that one plan refuses)."""
