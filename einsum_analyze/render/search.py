"""Terminal tables of the plan choice: memory-limit sweeps, the budget, the search."""

from __future__ import annotations

from rich import box
from rich.table import Table

from ..report.report import Report
from .formatting import format_bytes, format_count, format_seconds
from .layout import plural
from .model import slicing_text

__all__ = ["budget_table", "limits_table", "recommended_line", "search_table"]


def limits_table(report: Report) -> Table | None:
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


def budget_table(report: Report) -> Table | None:
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


def search_table(report: Report) -> Table | None:
    """The forward-optimal plan and the training-optimal plan side by side."""
    found = report.search
    if found is None:
        return None
    title = (f"Training-aware search ({plural(found.candidates, 'path')}, objective "
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
    table.add_row("Pareto front", plural(len(found.pareto), "plan"), "")
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
    predicted = ""
    if plan.predicted is not None:
        predicted = (f", predicted {format_seconds(plan.predicted.total_s)} on "
                     f"{plan.predicted.source} {plan.predicted.profile}")
    text = (f"Recommended ({rec.objective}{within}): {plan.strategy}{sliced} on the "
            f"{plan.source} path, training FLOPs {format_count(plan.training_flops)}, peak "
            f"{format_bytes(plan.peak_bytes)}{predicted}"
            + (f" (run as {rec.label!r})" if rec.measured else ""))
    cost = rec.budget_cost
    if rec.fits and rec.budget_bytes is not None and cost is not None:
        text += (f"; fits {format_bytes(rec.budget_bytes)} at {cost:.2f}x the time of the "
                 "unconstrained plan")
    for measured in rec.measured:
        ratios = [f"{key.removesuffix('_vs_torch')} {value:.2f}x"
                  for key, value in measured.items()
                  if key.endswith("_vs_torch") and isinstance(value, float)]
        if ratios:
            text += f"; on {measured['device']} vs torch autograd: " + ", ".join(ratios)
    return text
