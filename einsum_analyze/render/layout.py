"""Layout helpers for the terminal tables: wrapping, stacking, fitting to the console."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from rich import box
from rich.console import Console
from rich.table import Table

__all__ = ["MAX_STEP_ROWS", "costliest", "fit", "plural", "print_table", "stacked",
           "wrap_equation"]

MAX_STEP_ROWS = 40

T = TypeVar("T")


def costliest(
    items: Sequence[T], *, cost: Callable[[T], int], order: Callable[[T], int]
) -> list[T]:
    """All items, or the MAX_STEP_ROWS costliest of them, in their own order."""
    if len(items) <= MAX_STEP_ROWS:
        return list(items)
    return sorted(sorted(items, key=cost, reverse=True)[:MAX_STEP_ROWS], key=order)


def plural(count: int, word: str, many: str | None = None) -> str:
    """``1 step``, ``3 steps``: a count with its noun in the right number."""
    return f"{count:,} {word if count == 1 else (many or word + 's')}"


def wrap_equation(text: str, width: int) -> str:
    r"""An equation broken into lines of at most ``width`` after its commas.

    A line never breaks inside a term, nor before the ``->`` and the output, which stay
    with the last input term: ``'abc,cd,de->ae'`` at width 8 reads ``'abc,cd,\nde->ae'``.
    """
    if len(text) <= width:
        return text
    inputs, arrow, output = text.partition("->")
    pieces = [term + "," for term in inputs.split(",")]
    pieces[-1] = pieces[-1][:-1] + arrow + output
    lines: list[str] = []
    line = ""
    for piece in pieces:
        if line and len(line) + len(piece) > width:
            lines.append(line)
            line = ""
        line += piece
    lines.append(line)
    return "\n".join(lines)


def stacked(table: Table, width: int | None = None) -> Table:
    """The same table as one block per row: ``header  value`` lines, a gap between rows.

    Any table with a header can be shown this way; its title and caption are kept.
    ``width``: the table's width (the console's), so the title and caption use it.
    """
    out = Table(title=table.title, caption=table.caption, show_header=False,
                box=box.SIMPLE, padding=(0, 1, 0, 0), show_edge=False, width=width)
    out.add_column("figure", style="bold", no_wrap=True)
    out.add_column("value", overflow="fold", ratio=1)
    columns = [(" ".join(str(column.header).split()), list(column.cells))
               for column in table.columns]
    rows = max((len(cells) for _, cells in columns), default=0)
    for number in range(rows):
        for header, cells in columns:
            value = cells[number] if number < len(cells) else ""
            if value == "" or value is None:
                continue
            out.add_row(header or "-", value)
        if number < rows - 1:
            out.add_section()
    return out


def fit(table: Table, console: Console) -> Table:
    """``table``, or its :func:`stacked` form when its rows do not fit this console.

    Rows that do not fit would be squeezed, their cells cut to ``2.…``; a block per
    row reads at any width. Key-value tables (no header) are kept: they wrap.
    """
    from rich.measure import Measurement

    width = console.width
    if not table.show_header:
        return table
    needed = Measurement.get(console, console.options.update(width=10_000), table)
    if needed.maximum > width:
        return stacked(table, width)
    return table


def print_table(console: Console, table: Table | None) -> None:
    """Print ``table``, fitted to the console (:func:`fit`); nothing for None."""
    if table is not None:
        console.print(fit(table, console))
