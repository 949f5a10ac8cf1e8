"""Terminal rendering of verdicts: budget checks, a batch of cases, a comparison."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from ..report.report import BudgetCheck, Report
from .formatting import format_bytes, format_count, format_exact_bytes, format_seconds
from .layout import print_table

if TYPE_CHECKING:
    from ..report.cases import BatchReport
    from ..report.changes import Change
    from ..report.compare import Comparison

__all__ = ["budget_failure_lines", "budgets_table", "regression_lines", "render_batch",
           "render_comparison"]


def _format_figure(value: float | None, unit: str) -> str:
    """A figure in its unit for display; ``-`` when absent."""
    if value is None:
        return "-"
    match unit:
        case "flops":
            return format_count(int(value))
        case "bytes":
            return format_bytes(value)
        case "s":
            return format_seconds(float(value))
        case "ratio":
            return f"{float(value):.3g}x"
    return str(value)


def _exact_figure(value: float | None, unit: str) -> str:
    """A figure exactly, for log lines: ``53,924 B (52.66 KiB)``."""
    if value is None:
        return "not measured"
    match unit:
        case "flops":
            return f"{int(value):,} FLOPs"
        case "bytes":
            return format_exact_bytes(int(value))
        case "s":
            return format_seconds(float(value))
        case "ratio":
            return f"{float(value):.3g}x"
    return str(value)


def budgets_table(checks: Sequence[BudgetCheck]) -> Table:
    """One row per budget check: the figure, its limit and the verdict."""
    failed = sum(not check.passed for check in checks)
    title = "Budgets: all within their limits" if not failed else f"Budgets: {failed} exceeded"
    table = Table(title=title)
    for header in ("budget", "subject", "value", "limit", "result"):
        table.add_column(header, justify="right" if header in ("value", "limit") else "left")
    for check in checks:
        result = (
            "[green]pass[/green]" if check.value is not None and check.passed
            else "not measured" if check.value is None
            else "[red]EXCEEDED[/red]"
        )
        table.add_row(check.name, check.subject, _format_figure(check.value, check.unit),
                      _format_figure(check.limit, check.unit), result)
    return table


def budget_failure_lines(checks: Sequence[BudgetCheck], case: str | None = None) -> list[str]:
    """One plain line per exceeded budget, for stderr: the budget, the figure, the limit."""
    where = f"case {case!r}: " if case is not None else ""
    return [
        f"Budget exceeded: {where}{check.name} on {check.subject}: "
        f"{_exact_figure(check.value, check.unit)} > limit {_exact_figure(check.limit, check.unit)}"
        for check in checks
        if not check.passed
    ]


def render_batch(batch: BatchReport, console: Console) -> None:
    """Print one row per case of a batch: status, headline figures and budgets.

    Why a case failed is not repeated here: the CLI prints it on stderr.
    """
    from rich.markup import escape  # a case's name is the user's text, not markup

    table = Table(title=f"Cases: {len(batch.cases)}",
                  caption="bwd FLOPs and train peak: the first modelled strategy (the "
                  "inference peak when none); peaks include the inputs; fwd+bwd: the "
                  "fastest run's median forward + backward per call, with its strategy")
    for header in ("case", "status", "FLOPs", "bwd FLOPs", "peak (incl. inputs)", "fwd+bwd",
                   "budgets"):
        table.add_column(header, justify="left" if header in ("case", "status") else "right",
                         no_wrap=header != "case", overflow="fold")
    for outcome in batch.cases:
        report = outcome.report
        if report is None:
            table.add_row(escape(outcome.name), "[red]error[/red]", "-", "-", "-", "-", "-")
            continue
        first = report.strategies[0] if report.strategies else None
        passed = sum(check.passed for check in report.budgets)
        status = {"ok": "[green]ok[/green]", "budget-exceeded": "[red]budget exceeded[/red]",
                  "error": "[red]error[/red]"}[outcome.status]
        table.add_row(
            escape(outcome.name),
            status,
            format_count(report.plan.user_flops),
            format_count(first.backward_flops) + f" ({first.name})" if first else "-",
            format_bytes(first.memory.peak_bytes if first else report.forward_memory.peak_bytes),
            _fastest_run(report),
            f"{passed}/{len(report.budgets)} pass" if report.budgets else "-",
        )
    print_table(console, table)


def _fastest_run(report: Report) -> str:
    """The fastest run's median forward + backward seconds and its strategy, or ``-``."""
    times = [
        (run.forward.median_s + (run.backward.median_s if run.backward else 0.0), run.strategy)
        for run in report.runs if run.skipped is None and run.forward is not None
    ]
    if not times:
        return "-"
    seconds, name = min(times)
    return f"{format_seconds(seconds)} ({name})"


def _change_text(before: float | None, after: float | None) -> str:
    if before is None or after is None:
        return ""
    if before == 0:
        return "new" if after else "0%"
    return f"{(after - before) / before:+.1%}"


_OUTCOME: dict[int | float | None, str] = {1: "passed", 0: "exceeded", None: "not set"}


def _budget_side(change: Change, side: str) -> str:
    """A budget's outcome on one side in words, with its figure and limit."""
    outcome = _OUTCOME[change.before if side == "before" else change.after]
    value, limit = change.fact(f"value_{side}"), change.fact(f"limit_{side}")
    unit = str(change.fact("budget_unit") or "")
    if outcome == "not set" or not isinstance(limit, int | float):
        return outcome
    if not isinstance(value, int | float):
        return f"{outcome} (not measured, limit {_format_figure(limit, unit)})"
    sign = "<=" if outcome == "passed" else ">"
    return f"{outcome} ({_format_figure(value, unit)} {sign} {_format_figure(limit, unit)})"


def _cells(change: Change) -> tuple[str, str, str]:
    """The before, after and change cells of one row of the comparison table."""
    if change.rule == "budget":
        return _budget_side(change, "before"), _budget_side(change, "after"), ""
    before = _format_figure(change.before, change.unit)
    after = _format_figure(change.after, change.unit)
    return before, after, _change_text(change.before, change.after)


def _figure_name(change: Change) -> str:
    if change.rule == "ratio":
        return f"{change.figure} / torch"
    return change.figure or change.detail


def render_comparison(comparison: Comparison, console: Console) -> None:
    """Print the figures that changed between two reports, and the notes."""
    from rich.markup import escape  # case names and notes are the user's text

    changed = [c for c in comparison.changes if c.status != "unchanged"]
    if not changed:
        console.print(f"No figure changed ({len(comparison.changes)} compared).")
    else:
        table = Table(title=f"Changed figures ({len(changed)} of {len(comparison.changes)})")
        headers: tuple[str, ...] = ("subject", "figure", "before", "after", "change", "verdict")
        if comparison.kind == "batch":
            headers = ("case", *headers)
        for header in headers:
            numeric = header in ("before", "after", "change")
            table.add_column(header, justify="right" if numeric else "left",
                             no_wrap=header in ("change", "verdict"), overflow="fold")
        for change in changed:
            verdict = {
                "regressed": "[red]regressed[/red]",
                "improved": "[green]improved[/green]",
            }.get(change.status, change.status)
            row = [escape(change.subject), escape(_figure_name(change)), *_cells(change),
                   verdict]
            if comparison.kind == "batch":
                row.insert(0, escape(change.case or ""))
            table.add_row(*row)
        if any(c.rule == "ratio" for c in changed):
            table.caption = ("forward_s / torch, backward_s / torch: the run's median over "
                             "the torch-autograd baseline's, measured in the same report")
        print_table(console, table)
    for note in comparison.notes:
        console.print(f"[yellow]note:[/yellow] {escape(note)}")
    console.print(_rule_line(comparison), highlight=False)


def _rule_line(comparison: Comparison) -> str:
    """The closing line: how many regressed, and the rules that judged them."""
    regressed = len(comparison.regressions)
    times = ("times over the torch baseline of the same report"
             if comparison.times == "ratio" else "times in seconds")
    rules = (f"FLOPs and memory exact, {times} within "
             f"{comparison.tolerance:.1%} plus the medians' notches")
    if regressed:
        return f"{regressed} regressed; {rules}."
    return f"No regression ({rules})."


def regression_lines(comparison: Comparison) -> list[str]:
    """One plain line per regressed figure, for stderr."""
    lines = []
    for change in comparison.regressions:
        where = f"case {change.case!r}: " if change.case is not None else ""
        if change.rule == "budget":
            was = _budget_side(change, "before")
            lines.append(f"Regression: {where}{change.subject}: "
                         f"{_budget_side(change, 'after')} after, {was} before")
            continue
        if not change.figure:
            lines.append(f"Regression: {where}{change.detail}")
            continue
        relative = _change_text(change.before, change.after)
        line = (f"Regression: {where}{change.subject} {_figure_name(change)}: "
                f"{_exact_figure(change.before, change.unit)} -> "
                f"{_exact_figure(change.after, change.unit)} ({relative})")
        if change.rule == "ratio":
            seconds = [change.fact("seconds_before"), change.fact("seconds_after")]
            if all(isinstance(value, float) for value in seconds):
                line += (f"; in seconds {format_seconds(float(seconds[0] or 0))} -> "
                         f"{format_seconds(float(seconds[1] or 0))}")
        lines.append(line)
    return lines
