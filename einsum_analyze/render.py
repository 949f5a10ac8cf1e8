"""Terminal rendering of a :class:`Report` with rich. Computes nothing; formats only."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

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
    "fit",
    "plural",
    "render_analysis",
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

MAX_STEP_ROWS = 40

T = TypeVar("T")


def _costliest(
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


def _print(console: Console, table: Table | None) -> None:
    if table is not None:
        console.print(fit(table, console))


def _steps_table(report: Report) -> Table:
    plan = report.plan
    steps: Sequence[Step] = plan.steps
    shown = _costliest(steps, cost=lambda s: s.flops, order=lambda s: s.index)
    table = Table(title=f"Forward path ({plan.optimizer}): {plural(len(steps), 'step')}")
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
            wrap_equation(step.equation, 40),
            ",".join(str(p) for p in step.operands),
            step.summed or "-",
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
    table.add_column("value", justify="right", overflow="fold")
    typed = " ".join(report.equation.text.split())
    if typed != report.equation.explicit:
        table.add_row("equation as typed", wrap_equation(typed, 36))
        table.add_row("normalised", wrap_equation(report.equation.explicit, 36))
    else:
        table.add_row("equation", wrap_equation(report.equation.explicit, 36))
    table.add_row("dtype", report.dtype)
    table.add_row("FLOPs", format_count(plan.flops))
    table.add_row("naive FLOPs (one einsum)", format_count(plan.naive_flops))
    speedup = plan.speedup
    table.add_row(
        "speedup over naive",
        f"{speedup:.3g}x" if speedup is not None else f"1e{plan.log10_speedup:.0f}x",
    )
    if speedup is not None and speedup < 1:
        table.add_row("", "below 1x: opt_einsum counts a repeated index (a diagonal) or "
                      "a sum as a full contraction in the path, not in the one einsum")
    table.add_row(
        "largest intermediate",
        f"{format_count(plan.largest_intermediate_elements)} elements "
        f"({format_bytes(plan.largest_intermediate_elements * report.itemsize)})",
    )
    table.add_row("inputs", format_bytes(mem.input_bytes))
    table.add_row("peak (incl. inputs)", format_bytes(mem.peak_bytes))
    table.add_row("peak without inputs", format_bytes(mem.peak_bytes_without_inputs))
    if report.inference_memory is not None:
        table.add_row("inference peak as run (incl. inputs)",
                      format_bytes(report.inference_memory.peak_bytes))
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
            wrap_equation(spec.core_equation, 40),
            format_count(plan.flops),
            then,
            format_bytes(spec.elements * report.itemsize),
        )
    return table


def _strategies_table(report: Report) -> Table | None:
    results = report.strategies
    if not results:
        return None
    least_flops = min(r.forward_flops + r.backward_flops for r in results)
    least_peak = min(r.memory.peak_bytes for r in results)
    inference = _inference_peak(report)
    table = Table(
        title="Backward strategies (* fewest FLOPs, + lowest training peak)",
        caption="bwd/fwd: bwd FLOPs over the strategy's own fwd FLOPs (torch-autograd: the "
        "path torch.einsum plans); retained: kept for backward beyond the inputs and the "
        "output; vs inference: train peak over the inference peak as run, "
        f"{format_bytes(inference)}, both with the inputs",
        box=box.SIMPLE_HEAD,
        padding=(0, 1, 0, 0),
    )
    for header in ("strategy", "fwd FLOPs", "bwd FLOPs", "bwd/fwd", "retained",
                   "train peak (incl. inputs)", "vs inference"):
        table.add_column(header, justify="left" if header == "strategy" else "right",
                         no_wrap=True)
    for r in results:
        total = r.forward_flops + r.backward_flops
        table.add_row(
            r.name,
            format_count(r.forward_flops),
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
    bases = dict.fromkeys(part.strip() for r in report.runs if r.memory_measurement
                          for part in r.memory_measurement.split(";"))
    scales = report.environment.get("operand_scales")
    scaled = (f"; {report.dtype} operands: N(0, 1) times {min(scales):.3g} to "
              f"{max(scales):.3g} per operand, so that sums stay finite" if scales else "")
    table = Table(
        title="Runs (median per call; * fastest forward+backward, + leanest measured peak)",
        caption="peak: measured, inputs included; retained: measured, kept for backward; "
        "predicted: the model's peak, inputs included; vs torch: time, then peak, over "
        "torch-autograd's on the same device; the JSON report has the spreads. Memory "
        "measured by: " + ("; ".join(bases) or "-") + scaled,
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
            table.add_row(name, run.device, "skipped", "-", "-",
                          format_bytes(run.peak_bytes_predicted)
                          if run.peak_bytes_predicted is not None else "-")
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
            f"{run.max_grad_error:.1e}" if run.max_grad_error is not None
            else "overflow" if (run.note or "").startswith("overflowed") else "-",
            versus,
        )
    return table


def _inference_peak(report: Report) -> int:
    memory = report.inference_memory or report.forward_memory
    return memory.peak_bytes


def slicing_text(section: Mapping[str, Any]) -> str:
    """What a sliced plan slices: ``n:2 (4 slices)``."""
    chunks = ",".join(f"{label}:{chunk}" for label, chunk
                      in zip(section["indices"], section["chunks"], strict=True))
    return f"{chunks or 'nothing'} ({plural(section['count'], 'slice')})"


def slicing_lines(report: Report) -> list[str]:
    """One line per sliced strategy: what it slices and what that costs."""
    lines = []
    for r in report.strategies:
        section = r.details.get("slicing")
        if section is None:
            continue
        lines.append(
            f"{r.name}: {slicing_text(section)}, {section['overhead_ratio']:.3f}x the "
            f"unsliced FLOPs; one slice peaks at {format_bytes(section['per_slice_peak_bytes'])}"
            f", the step at {format_bytes(section['peak_bytes_with_accumulators'])} with its "
            f"full-size buffers; {plural(section['copies'], 'part copy', 'part copies')}"
        )
    return lines


def answer_line(report: Report) -> str:
    """One sentence answering: what does backward cost next to forward?"""
    inference = _inference_peak(report)
    parts = [
        f"{r.name} backward = {r.backward_flops / max(r.forward_flops, 1):.2f}x forward FLOPs, "
        f"training peak {r.memory.peak_bytes / max(inference, 1):.2f}x the inference peak"
        for r in report.strategies
    ]
    return "; ".join(parts) + "."


def render_analysis(report: Report, console: Console) -> None:
    """Print what the analysis found: the forward path, gradients and strategies.

    This is everything that exists before a run starts, so the CLI prints it at once.
    """
    _print(console, _steps_table(report))
    _print(console, _summary_table(report))
    _print(console, _gradients_table(report))
    _print(console, _strategies_table(report))
    for line in slicing_lines(report):
        console.print(line, highlight=False)
    if report.strategies:
        console.print(answer_line(report))
    for table in (_limits_table(report), _budget_table(report), _search_table(report)):
        _print(console, table)
    line = recommended_line(report)
    if line:
        console.print(line, highlight=False)


def render_runs(report: Report, console: Console, warnings: Console | None = None) -> None:
    """Print the runs, then each warning once (to ``warnings``, e.g. stderr), then budgets."""
    _print(console, _runs_table(report))
    for line in skip_lines(report):
        console.print(line, highlight=False)
    if report.recommended is not None and report.recommended.measured:
        console.print(recommended_line(report), highlight=False)
    for warning in dict.fromkeys(report.warnings):
        (warnings or console).print(f"[yellow]warning:[/yellow] {warning}", highlight=False)
    if report.budgets:
        _print(console, _budgets_table(report.budgets))


def render_report(report: Report, console: Console, warnings: Console | None = None) -> None:
    """Print the report's tables to ``console``; warnings to ``warnings`` when given."""
    render_analysis(report, console)
    render_runs(report, console, warnings)


def skip_lines(report: Report) -> list[str]:
    """One line per reason runs were skipped: ``skipped reverse, independent on cpu: ...``."""
    reasons: dict[tuple[str, str], list[str]] = {}
    for run in report.runs:
        if run.skipped is not None:
            reasons.setdefault((run.device, run.skipped), []).append(run.strategy)
    return [f"skipped {', '.join(names)} on {device}: {reason}"
            for (device, reason), names in reasons.items()]


def _limits_table(report: Report) -> Table | None:
    """One row per memory limit of a sweep."""
    if not report.memory_limits:
        return None
    table = Table(
        title="Memory limits (forward path planned under each; best plan within it)",
        caption="per strategy: bwd FLOPs / retained / training peak (peaks include the "
        "inputs); best: the recommended plan within the limit, training FLOPs / peak",
        box=box.SIMPLE_HEAD, padding=(0, 1, 0, 0),
    )
    names = [s.name for s in report.memory_limits[0].strategies]
    for header in ("limit", "elements", "path by", "fwd FLOPs", "infer peak", *names, "best"):
        table.add_column(header, justify="left" if header in ("limit", "path by") else "right",
                         overflow="fold")
    budget = report.budget.budget_bytes if report.budget is not None else None
    for row in report.memory_limits:
        cells = []
        by_name = {s.name: s for s in row.strategies}
        for name in names:
            s = by_name.get(name)
            if s is None:
                cells.append("-")
                continue
            mark = "" if budget is None else (" fits" if s.memory.peak_bytes <= budget else "")
            cells.append(f"{format_count(s.backward_flops)} / "
                         f"{format_bytes(s.memory.retained_bytes)} / "
                         f"{format_bytes(s.memory.peak_bytes)}{mark}")
        best = "-"
        if row.best is not None:
            best = (f"{row.best.strategy}: {format_count(row.best.training_flops)} / "
                    f"{format_bytes(row.best.peak_bytes)}"
                    + ("" if row.fits is not False else " (over budget)"))
        table.add_row(row.limit, "-" if row.limit_elements is None else
                      format_count(row.limit_elements), row.optimizer,
                      format_count(row.forward_flops), format_bytes(row.inference_peak_bytes),
                      *cells, best)
    return table


def _budget_table(report: Report) -> Table | None:
    """Each strategy's training peak against the budget."""
    summary = report.budget
    if summary is None:
        return None
    table = Table(
        title=f"Training budget {format_bytes(summary.budget_bytes)} (floor "
        f"{format_bytes(summary.floor_bytes)}: inputs, upstream and returned gradients)",
        box=box.SIMPLE_HEAD, padding=(0, 1, 0, 0),
    )
    for header in ("strategy", "train peak (incl. inputs)", "fits"):
        table.add_column(header, justify="left" if header == "strategy" else "right")
    for name, peak, fits in summary.strategies:
        table.add_row(name, format_bytes(peak), "yes" if fits else "no")
    if summary.smallest_peak_bytes is not None:
        table.add_row("(search) smallest reachable", format_bytes(summary.smallest_peak_bytes),
                      "yes" if summary.smallest_peak_bytes <= summary.budget_bytes else "no")
    return table


def _search_table(report: Report) -> Table | None:
    """The forward-optimal plan and the training-optimal plan side by side."""
    found = report.search
    if found is None:
        return None
    title = (f"Training-aware search ({found.candidates} paths, objective "
             f"{found.objective}, {format_seconds(found.search_s)})")
    table = Table(
        title=title, min_width=len(title),  # a title wider than its table splits "607 / ms"
        caption="forward-optimal: least forward FLOPs among the candidates; "
        "training-optimal: least objective, budget aside; peaks include the inputs",
        box=box.SIMPLE_HEAD, padding=(0, 1, 0, 0),
    )
    for header in ("", "forward-optimal", "training-optimal"):
        table.add_column(header, justify="left" if not header else "right", overflow="fold")
    pair = (found.forward_optimal, found.training_optimal)
    table.add_row("path from", *(p.source for p in pair))
    table.add_row("strategy", *(p.strategy for p in pair))
    table.add_row("forward FLOPs", *(format_count(p.forward_flops) for p in pair))
    table.add_row("training FLOPs", *(format_count(p.training_flops) for p in pair))
    table.add_row("retained", *(format_bytes(p.retained_bytes) for p in pair))
    table.add_row("training peak", *(format_bytes(p.peak_bytes) for p in pair))
    table.add_row("Pareto front", f"{len(found.pareto)} plans", "")
    return table


def recommended_line(report: Report) -> str:
    """One line: the recommended plan, its figures, and after runs its measured ratios."""
    rec = report.recommended
    if rec is None:
        return ""
    plan = rec.plan
    within = ""
    if rec.budget_bytes is not None:
        within = (f" within {format_bytes(rec.budget_bytes)}" if rec.fits else
                  f"; nothing fits {format_bytes(rec.budget_bytes)}, smallest reachable peak")
    section = plan.result.details.get("slicing")
    sliced = f" ({slicing_text(section)})" if section else ""
    text = (f"Recommended ({rec.objective}{within}): {plan.strategy}{sliced} on the "
            f"{plan.source} path, training FLOPs {format_count(plan.training_flops)}, peak "
            f"{format_bytes(plan.peak_bytes)} (run as {rec.label!r})")
    for measured in rec.measured:
        ratios = [f"{key.removesuffix('_vs_torch')} {value:.2f}x"
                  for key, value in measured.items()
                  if key.endswith("_vs_torch") and isinstance(value, float)]
        if ratios:
            text += f"; on {measured['device']} vs torch autograd: " + ", ".join(ratios)
    return text

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
            format_count(report.plan.flops),
            format_count(first.backward_flops) + f" ({first.name})" if first else "-",
            format_bytes(first.memory.peak_bytes if first else report.forward_memory.peak_bytes),
            _fastest_run(report),
            f"{passed}/{len(report.budgets)} pass" if report.budgets else "-",
        )
    _print(console, table)


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
        _print(console, table)
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
