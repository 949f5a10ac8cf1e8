"""Terminal rendering of a :class:`Report` with rich. Computes nothing; formats only."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from .report import Report

__all__ = ["answer_line", "format_bytes", "format_count", "format_seconds", "render_report"]

MAX_STEP_ROWS = 40


def format_bytes(value: float) -> str:
    """Bytes in IEC units for display: ``1536 -> '1.50 KiB'``."""
    amount = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(amount) < 1024 or unit == "PiB":
            return f"{int(amount)} B" if unit == "B" else f"{amount:.2f} {unit}"
        amount /= 1024
    raise AssertionError("unreachable")


def format_count(value: int) -> str:
    """Counts exact below a million, else in scientific notation: ``10616832 -> '1.06e7'``."""
    if abs(value) < 1_000_000:
        return f"{value:,}"
    mantissa, exponent = f"{value:.2e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def format_seconds(value: float) -> str:
    """Seconds in the unit that suits them: ``0.0123 -> '12.3 ms'``."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value / 1e-9:.3g} ns"


def _steps_table(report: Report) -> Table:
    plan = report.plan
    steps: Sequence = plan.steps
    shown = steps
    if len(steps) > MAX_STEP_ROWS:
        costliest = sorted(steps, key=lambda s: s.flops, reverse=True)[:MAX_STEP_ROWS]
        shown = sorted(costliest, key=lambda s: s.index)
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
    table.add_row("speedup over naive", f"{plan.naive_flops / max(plan.flops, 1):.3g}x")
    table.add_row(
        "largest intermediate",
        f"{format_count(plan.largest_intermediate_elements)} elements "
        f"({format_bytes(plan.largest_intermediate_elements * report.itemsize)})",
    )
    table.add_row("inputs", format_bytes(mem.input_bytes))
    table.add_row("peak (inputs included)", format_bytes(mem.peak_bytes))
    table.add_row("peak above inputs", format_bytes(mem.peak_bytes_without_inputs))
    if report.memory_limit_elements is not None:
        table.add_row("planner memory limit", f"{format_count(report.memory_limit_elements)} elements")
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
    rows = list(zip(gradients.specs, gradients.plans, strict=True))
    if len(rows) > MAX_STEP_ROWS:
        rows = sorted(rows, key=lambda row: row[1].flops, reverse=True)[:MAX_STEP_ROWS]
        rows.sort(key=lambda row: row[0].operand)
        table.caption = f"the {len(rows)} costliest of {len(gradients.specs)}; --json has all"
    for spec, plan in rows:
        then = {
            "none": "-",
            "view": f"broadcast {spec.broadcast}" if spec.broadcast else "permute",
            "embed": "diagonal embed" + (f", broadcast {spec.broadcast}" if spec.broadcast else ""),
        }[spec.unreduce]
        table.add_row(
            str(spec.operand),
            spec.core_equation if len(spec.core_equation) <= 60 else spec.core_equation[:57] + "...",
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
    table = Table(
        title="Backward strategies (* fewest FLOPs, + lowest training peak)",
        caption="bwd/fwd: backward over forward FLOPs; vs inference: training peak over "
        "the inference peak",
    )
    for header in ("strategy", "bwd FLOPs", "bwd/fwd", "retained", "train peak", "vs inference"):
        table.add_column(header, justify="left" if header == "strategy" else "right",
                         no_wrap=True)
    inference = report.forward_memory.peak_bytes
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


def answer_line(report: Report) -> str:
    """One sentence answering: what does backward cost next to forward?"""
    inference = report.forward_memory.peak_bytes
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
    for table in (_gradients_table(report), _strategies_table(report)):
        if table is not None:
            console.print(table)
    if report.strategies:
        console.print(answer_line(report))
    for warning in report.warnings:
        console.print(f"[yellow]warning:[/yellow] {warning}")
