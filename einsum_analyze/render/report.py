"""Terminal rendering of a :class:`Report` with rich. Computes nothing; formats only.

The tables live by concern: :mod:`.layout` (wrapping, stacking, fitting),
:mod:`.model` (forward path, gradients, strategies), :mod:`.search`
(memory limits, budget, search, recommendation), :mod:`.measured` (runs) and
:mod:`.checks` (budget checks, batches, comparisons). This module puts them in
order and keeps the names other modules import from it.
"""

from __future__ import annotations

from rich.console import Console

from ..report.report import Report
from .checks import (
    budget_failure_lines,
    budgets_table,
    regression_lines,
    render_batch,
    render_comparison,
)
from .formatting import format_bytes, format_count, format_seconds
from .layout import fit, plural, print_table, stacked, wrap_equation
from .measured import runs_table, skip_lines
from .model import (
    answer_line,
    gradients_table,
    slicing_lines,
    steps_table,
    strategies_table,
    summary_table,
)
from .search import budget_table, limits_table, recommended_line, search_table

__all__ = [
    "answer_line",
    "fit",
    "plural",
    "render_analysis",
    "render_model",
    "render_search",
    "render_runs",
    "skip_lines",
    "stacked",
    "wrap_equation",
    "budget_failure_lines",
    "format_bytes",
    "format_count",
    "format_seconds",
    "regression_lines",
    "render_batch",
    "render_comparison",
    "recommended_line",
    "render_report",
]



def render_analysis(report: Report, console: Console) -> None:
    """Print what the analysis found: the forward path, gradients and strategies.

    This is everything that exists before a run starts, so the CLI prints it at once.
    """
    render_model(report, console)
    render_search(report, console)


def render_model(report: Report, console: Console) -> None:
    """Print the forward path, gradients and strategies: all that precedes the search."""
    print_table(console, steps_table(report))
    print_table(console, summary_table(report))
    print_table(console, gradients_table(report))
    print_table(console, strategies_table(report))
    for line in slicing_lines(report):
        console.print(line, highlight=False)
    if report.strategies:
        console.print(answer_line(report))


def render_search(report: Report, console: Console) -> None:
    """Print the limit sweep, the budget, the search and the recommended plan."""
    for table in (limits_table(report), budget_table(report), search_table(report)):
        print_table(console, table)
    line = recommended_line(report)
    if line:
        console.print(line, highlight=False)


def render_runs(report: Report, console: Console, warnings: Console | None = None) -> None:
    """Print the runs, then each warning once (to ``warnings``, e.g. stderr), then budgets."""
    print_table(console, runs_table(report))
    for line in skip_lines(report):
        console.print(line, highlight=False)
    if report.recommended is not None and report.recommended.measured:
        console.print(recommended_line(report), highlight=False)
    for warning in dict.fromkeys(report.warnings):
        (warnings or console).print(f"[yellow]warning:[/yellow] {warning}", highlight=False)
    if report.budgets:
        print_table(console, budgets_table(report.budgets))


def render_report(report: Report, console: Console, warnings: Console | None = None) -> None:
    """Print the report's tables to ``console``; warnings to ``warnings`` when given."""
    render_analysis(report, console)
    render_runs(report, console, warnings)

