"""Tables that fit the terminal without cutting what a user must copy.

Identifiers (GPU and model keys, row ids, repo ids) and numbers are never wrapped or ellipsised: their columns
are ``no_wrap`` and as wide as their widest cell. When the table is wider than the console, the least
important columns are dropped (each column has a :attr:`Column.drop_order`) and one line says which; when even
the columns that are always shown do not fit, every row is printed as a short record instead. When stdout is
not a terminal the console is wide (:data:`autotune.cli.console.PIPE_WIDTH`), so every column is shown.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from autotune.cli.console import console

if TYPE_CHECKING:
    from rich.table import Table


@dataclass(frozen=True)
class Column:
    """One column of a :func:`print_table`.

    ``drop_order`` 0 means always shown; at a narrow width columns are dropped highest first. ``wrap`` is for
    prose (a GPU's marketing name, alias lists) that may break at spaces; anything else keeps its cells whole.
    """

    header: str
    justify: Literal["left", "right"] = "left"
    drop_order: int = 0
    wrap: bool = False


def build_table(columns: Sequence[Column], rows: Sequence[Sequence[str]]) -> Table:
    """A rich table of ``rows`` under ``columns`` (cells are markup; the title is printed above it)."""
    from rich.table import Table

    table = Table(show_edge=False)
    for column in columns:
        table.add_column(
            column.header,
            justify=column.justify,
            no_wrap=not column.wrap,
            overflow="fold",
        )
    for row in rows:
        table.add_row(*row)
    return table


def _column_width(column: Column, cells: Sequence[str]) -> int:
    """The narrowest a column can be without cutting a cell, and never less than its header.

    That is its widest cell (a ``wrap`` column: its longest word).
    """
    from rich.text import Text

    def width(text: str, markup: bool) -> int:
        plain = Text.from_markup(text).plain if markup else text
        parts = plain.split() if column.wrap else plain.splitlines()
        return max((Text(part).cell_len for part in parts), default=0)

    return max([width(column.header, markup=False), *(width(cell, markup=True) for cell in cells)])


def table_width(columns: Sequence[Column], rows: Sequence[Sequence[str]]) -> int:
    """Columns the table of :func:`build_table` needs at least.

    That is the cell widths, 1 space of padding on each side and a separator between columns (no outer edge).
    """
    widths = [_column_width(column, [row[i] for row in rows]) for i, column in enumerate(columns)]
    return sum(widths) + 3 * len(widths) - 1


def fit_columns(columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int) -> tuple[list[int], list[str]]:
    """Indices of the columns that fit in ``width`` (dropping the highest ``drop_order`` first) and the headers dropped.

    All columns when nothing fits without dropping the always-shown ones.
    """
    keep = list(range(len(columns)))
    dropped: list[str] = []
    optional = sorted((i for i, c in enumerate(columns) if c.drop_order > 0), key=lambda i: -columns[i].drop_order)
    while True:
        if table_width([columns[i] for i in keep], [[row[i] for i in keep] for row in rows]) <= width or not optional:
            return keep, dropped
        index = optional.pop(0)
        keep.remove(index)
        dropped.append(columns[index].header.replace("\n", " "))


def print_table(
    title: str | None, columns: Sequence[Column], rows: Sequence[Sequence[str]], *, hint: str = "--json"
) -> None:
    """Print ``rows`` as a table that fits the console (see the module docstring).

    ``hint`` names where the dropped columns can be seen (printed in the one line that lists them).
    """
    from rich.markup import escape

    out = console()
    keep, dropped = fit_columns(columns, rows, out.width)
    kept_columns, kept_rows = [columns[i] for i in keep], [[row[i] for i in keep] for row in rows]
    if table_width(kept_columns, kept_rows) <= out.width:
        if title:
            out.print(title, style="italic")
        out.print(build_table(kept_columns, kept_rows))
        if dropped:
            out.print(
                f"[dim]not shown at {out.width} columns: {escape(', '.join(dropped))} "
                f"(a wider terminal, a pipe or {escape(hint)} shows them)[/]"
            )
        return
    _print_records(title, columns, rows)


def _print_records(title: str | None, columns: Sequence[Column], rows: Sequence[Sequence[str]]) -> None:
    """Each row as its first cell on one line and ``header: value`` pairs on the next (too narrow for a table)."""
    from rich.text import Text

    out = console()
    if title:
        out.print(title, style="italic")
    for row in rows:
        out.print(Text.from_markup(row[0]), soft_wrap=True)
        pairs = "; ".join(
            f"{c.header.replace(chr(10), ' ')}: {cell}" for c, cell in zip(columns[1:], row[1:], strict=True)
        )
        out.print(Text.from_markup("  " + pairs))
