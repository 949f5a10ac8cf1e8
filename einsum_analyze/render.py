"""Terminal rendering of a :class:`Report` with rich. Computes nothing; formats only."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

from rich import box
from rich.console import Console
from rich.table import Table

from .backends.base import Run
from .formatting import format_bytes, format_count, format_seconds
from .planning import Step
from .report import BudgetCheck, Report

if TYPE_CHECKING:
    from .cases import BatchReport
    from .compare import Comparison

__all__ = [
    "answer_line",
    "budget_failure_lines",
    "format_bytes",
    "format_count",
    "format_seconds",
    "regression_lines",
    "render_batch",
    "render_comparison",
    "render_report",
]

MAX_STEP_ROWS = 40

T = TypeVar("T")


def _costliest(
    items: Sequence[T], *, cost: Callable[[T], int], order: Callable[[T], int]
) -> list[T]:
    """All items, or the MAX_STEP_ROWS costliest of them, in their own order."""
    if len(items) <= MAX_STEP_ROWS:
        return list(items)
    return sorted(sorted(items, key=cost, reverse=True)[:MAX_STEP_ROWS], key=order)


def _steps_table(report: Report) -> Table:
    plan = report.plan
    steps: Sequence[Step] = plan.steps
    shown = _costliest(steps, cost=lambda s: s.flops, order=lambda s: s.index)
    table = Table(title=f"Forward path ({plan.optimizer}): {len(steps)} steps")
    table.add_column("#", justify="right")
    table.add_column("step")
    table.add_column("operands", justify="right")
    table.add_column("summed")
    table.add_column("FLOPs", justify="right")
    table.add_column("output elements", justify="right")
    table.add_column("output", justify="right")
    for step in shown:
        table.add_row(
            str(step.index),
            step.equation,
            ",".join(str(p) for p in step.operands),
            step.removed or "-",
            format_count(step.flops),
            format_count(step.output_elements),
            format_bytes(step.output_elements * report.itemsize),
        )
    if len(shown) < len(steps):
        table.caption = (
            f"the {len(shown)} costliest of {len(steps)} steps; --json has them all"
        )
    return table


def _summary_table(report: Report) -> Table:
    plan = report.plan
    mem = report.forward_memory
    table = Table(title="Forward summary", show_header=False)
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_row("equation", report.equation.explicit)
    table.add_row("dtype", report.dtype)
    table.add_row("FLOPs", format_count(plan.flops))
    table.add_row("naive FLOPs (one einsum)", format_count(plan.naive_flops))
    speedup = plan.speedup
    table.add_row(
        "speedup over naive",
        f"{speedup:.3g}x" if speedup is not None else f"1e{plan.log10_speedup:.0f}x",
    )
    table.add_row(
        "largest intermediate",
        f"{format_count(plan.largest_intermediate_elements)} elements "
        f"({format_bytes(plan.largest_intermediate_elements * report.itemsize)})",
    )
    table.add_row("inputs", format_bytes(mem.input_bytes))
    table.add_row("peak (incl. inputs)", format_bytes(mem.peak_bytes))
    table.add_row("peak without inputs", format_bytes(mem.peak_bytes_without_inputs))
    if report.memory_limit_elements is not None:
        limit = format_count(report.memory_limit_elements)
        table.add_row("planner memory limit", f"{limit} elements")
    table.add_row("analysis time", format_seconds(report.analysis_s))
    return table


def _gradients_table(report: Report) -> Table | None:
    gradients = report.gradients
    if gradients is None or not gradients.specs:
        return None
    table = Table(title=f"Gradient contractions ({gradients.optimizer})")
    table.add_column("operand", justify="right")
    table.add_column("core contraction")
    table.add_column("FLOPs", justify="right")
    table.add_column("then")
    table.add_column("gradient", justify="right")
    every = list(zip(gradients.specs, gradients.plans, strict=True))
    rows = _costliest(every, cost=lambda row: row[1].flops, order=lambda row: row[0].operand)
    if len(rows) < len(every):
        table.caption = f"the {len(rows)} costliest of {len(gradients.specs)}; --json has all"
    for spec, plan in rows:
        then = {
            "none": "-",
            "view": f"broadcast {spec.broadcast}" if spec.broadcast else "permute",
            "embed": "diagonal embed" + (f", broadcast {spec.broadcast}" if spec.broadcast else ""),
        }[spec.unreduce]
        table.add_row(
            str(spec.operand),
            _shorten(spec.core_equation, 60),
            format_count(plan.flops),
            then,
            format_bytes(spec.elements * report.itemsize),
        )
    return table


def _shorten(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _strategies_table(report: Report) -> Table | None:
    results = report.strategies
    if not results:
        return None
    least_flops = min(r.forward_flops + r.backward_flops for r in results)
    least_peak = min(r.memory.peak_bytes for r in results)
    table = Table(
        title="Backward strategies (* fewest FLOPs, + lowest training peak)",
        caption="bwd/fwd: backward over forward FLOPs; retained: kept for backward beyond the "
        "inputs and the output; vs inference: training peak over the inference peak, both "
        "with the inputs",
    )
    for header in ("strategy", "bwd FLOPs", "bwd/fwd", "retained", "train peak (incl. inputs)",
                   "vs inference"):
        table.add_column(header, justify="left" if header == "strategy" else "right",
                         no_wrap=True)
    inference = _inference_peak(report)
    for r in results:
        total = r.forward_flops + r.backward_flops
        table.add_row(
            r.name,
            format_count(r.backward_flops) + (" *" if total == least_flops else ""),
            f"{r.backward_flops / max(r.forward_flops, 1):.2f}x",
            format_bytes(r.memory.retained_bytes),
            format_bytes(r.memory.peak_bytes) + (" +" if r.memory.peak_bytes == least_peak else ""),
            f"{r.memory.peak_bytes / max(inference, 1):.2f}x",
        )
    return table


def _runs_table(report: Report) -> Table | None:
    if not report.runs:
        return None
    bases = dict.fromkeys(r.memory_measurement for r in report.runs if r.memory_measurement)
    table = Table(
        title="Runs (median per call; * fastest forward+backward, + leanest measured peak)",
        caption="peak: measured, inputs included; retained: measured, kept for backward; "
        "predicted: the model's peak, inputs included; vs torch: time, then peak, over "
        "torch-autograd's on the same device; the JSON report has the spreads. Memory "
        "measured by: " + ("; ".join(bases) or "-"),
        box=box.SIMPLE_HEAD,
        padding=(0, 1, 0, 0),
    )
    for header in ("strategy", "device", "fwd", "bwd", "peak", "predicted", "retained",
                   "grad err", "vs torch"):
        table.add_column(header, justify="left" if header in ("strategy", "device") else "right",
                         no_wrap=True)
    done = [r for r in report.runs if r.skipped is None and r.forward is not None]

    def total(run: Run) -> float:
        assert run.forward is not None
        return run.forward.median_s + (run.backward.median_s if run.backward else 0.0)

    fastest = {d: min(total(r) for r in done if r.device == d) for d in {r.device for r in done}}
    measured = [r for r in done if r.peak_bytes_measured is not None]
    leanest = {d: min(r.peak_bytes_measured or 0 for r in measured if r.device == d)
               for d in {r.device for r in measured}}
    torch_runs = {r.device: r for r in done if r.strategy == "torch-autograd"}
    for run in report.runs:
        name = run.strategy + ("" if run.backend == "torch" else f" ({run.backend})")
        if run.skipped is not None or run.forward is None:
            table.add_row(name, run.device, f"skipped: {run.skipped}")
            continue
        time_s = total(run)
        peak = "-"
        if run.peak_bytes_measured is not None:
            peak = format_bytes(run.peak_bytes_measured)
            peak += " +" if run.peak_bytes_measured == leanest.get(run.device) else ""
        versus = ""
        reference = torch_runs.get(run.device)
        if reference is not None and reference is not run:
            versus = f"{time_s / total(reference):.2f}x"
            if run.peak_bytes_measured and reference.peak_bytes_measured:
                versus += f" {run.peak_bytes_measured / reference.peak_bytes_measured:.2f}x"
        table.add_row(
            name,
            run.device,
            format_seconds(run.forward.median_s),
            (format_seconds(run.backward.median_s) if run.backward else "-")
            + (" *" if time_s == fastest[run.device] else ""),
            peak,
            format_bytes(run.peak_bytes_predicted) if run.peak_bytes_predicted is not None
            else "-",
            format_bytes(run.retained_bytes_measured) if run.retained_bytes_measured is not None
            else "-",
            f"{run.max_grad_error:.1e}" if run.max_grad_error is not None else "-",
            versus,
        )
    return table


def _inference_peak(report: Report) -> int:
    memory = report.inference_memory or report.forward_memory
    return memory.peak_bytes


def answer_line(report: Report) -> str:
    """One sentence answering: what does backward cost next to forward?"""
    inference = _inference_peak(report)
    parts = [
        f"{r.name} backward = {r.backward_flops / max(r.forward_flops, 1):.2f}x forward FLOPs, "
        f"training peak {r.memory.peak_bytes / max(inference, 1):.2f}x the inference peak"
        for r in report.strategies
    ]
    return "; ".join(parts) + "."


def render_report(report: Report, console: Console) -> None:
    """Print the report's tables to ``console``."""
    console.print(_steps_table(report))
    console.print(_summary_table(report))
    for table in (_gradients_table(report), _strategies_table(report), _runs_table(report)):
        if table is not None:
            console.print(table)
    if report.strategies:
        console.print(answer_line(report))
    for warning in report.warnings:
        console.print(f"[yellow]warning:[/yellow] {warning}")
    if report.budgets:
        console.print(_budgets_table(report.budgets))


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
    return str(value)


def _exact_figure(value: float | None, unit: str) -> str:
    """A figure exactly, for log lines: ``53,924 B (52.66 KiB)``."""
    if value is None:
        return "not measured"
    match unit:
        case "flops":
            return f"{int(value):,} FLOPs"
        case "bytes":
            exact = f"{int(value):,} B"
            return exact if value < 1024 else f"{exact} ({format_bytes(value)})"
        case "s":
            return f"{float(value):.6g} s"
    return str(value)


def _budgets_table(checks: Sequence[BudgetCheck]) -> Table:
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
    table = Table(title=f"Cases: {len(batch.cases)}",
                  caption="bwd FLOPs and train peak: the first modelled strategy (the "
                  "inference peak when none); peaks include the inputs")
    for header in ("case", "status", "FLOPs", "bwd FLOPs", "peak (incl. inputs)", "budgets"):
        table.add_column(header, justify="left" if header in ("case", "status") else "right",
                         no_wrap=header != "case", overflow="fold")
    for outcome in batch.cases:
        report = outcome.report
        if report is None:
            table.add_row(outcome.name, "[red]error[/red]", "-", "-", "-", "-")
            continue
        first = report.strategies[0] if report.strategies else None
        passed = sum(check.passed for check in report.budgets)
        status = {"ok": "[green]ok[/green]", "budget-exceeded": "[red]budget exceeded[/red]",
                  "error": "[red]error[/red]"}[outcome.status]
        table.add_row(
            outcome.name,
            status,
            format_count(report.plan.flops),
            format_count(first.backward_flops) + f" ({first.name})" if first else "-",
            format_bytes(first.memory.peak_bytes if first else report.forward_memory.peak_bytes),
            f"{passed}/{len(report.budgets)} pass" if report.budgets else "-",
        )
    console.print(table)


def _change_text(before: float | None, after: float | None) -> str:
    if before is None or after is None:
        return ""
    if before == 0:
        return "new" if after else "0%"
    return f"{(after - before) / before:+.1%}"


def render_comparison(comparison: Comparison, console: Console) -> None:
    """Print the figures that changed between two reports, and the notes."""
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
                             no_wrap=numeric or header == "verdict", overflow="fold")
        for change in changed:
            verdict = {
                "regressed": "[red]regressed[/red]",
                "improved": "[green]improved[/green]",
            }.get(change.status, change.status)
            row = [
                change.subject,
                change.figure or change.detail,
                _format_figure(change.before, change.unit),
                _format_figure(change.after, change.unit),
                _change_text(change.before, change.after),
                verdict,
            ]
            if comparison.kind == "batch":
                row.insert(0, change.case or "")
            table.add_row(*row)
        console.print(table)
    for note in comparison.notes:
        console.print(f"[yellow]note:[/yellow] {note}")
    regressed = len(comparison.regressions)
    console.print(
        f"{regressed} regressed; FLOPs and modelled memory exact, timings within "
        f"{comparison.tolerance:.1%}." if regressed else
        f"No regression (FLOPs and memory exact, timings within {comparison.tolerance:.1%})."
    )


def regression_lines(comparison: Comparison) -> list[str]:
    """One plain line per regressed figure, for stderr."""
    lines = []
    for change in comparison.regressions:
        where = f"case {change.case!r}: " if change.case is not None else ""
        if not change.figure:
            lines.append(f"Regression: {where}{change.detail}")
            continue
        relative = _change_text(change.before, change.after)
        lines.append(
            f"Regression: {where}{change.subject} {change.figure}: "
            f"{_exact_figure(change.before, change.unit)} -> "
            f"{_exact_figure(change.after, change.unit)} ({relative})"
        )
    return lines
