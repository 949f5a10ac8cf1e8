"""Terminal tables of what the analysis models: the forward path, gradients, strategies."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich import box
from rich.table import Table

from ..model.planning import Step
from ..report.report import Report
from .formatting import format_bytes, format_count, format_seconds
from .layout import costliest, plural, wrap_equation

__all__ = ["answer_line", "inference_peak", "slicing_lines", "slicing_text", "steps_table",
           "strategies_table", "summary_table", "gradients_table"]


def steps_table(report: Report) -> Table:
    """The forward path's steps, the costliest of a long path."""
    plan = report.plan.as_planned
    steps: Sequence[Step] = plan.steps
    shown = costliest(steps, cost=lambda s: s.flops, order=lambda s: s.index)
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


def summary_table(report: Report) -> Table:
    """The forward pass's figures: equation, FLOPs, speedup, memory, timing."""
    plan = report.plan.as_planned
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
    if report.plan.user_flops != plan.flops:
        # A size-1 dimension broadcasts: opt_einsum counts it at full size, the path not.
        table.add_row("FLOPs, opt_einsum's count", format_count(report.plan.user_flops))
        table.add_row("after normalisation", format_count(plan.flops))
    else:
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
    run = report.plan
    if run.wide is not None:
        # A step of three or more tensors runs pairwise: the figures of what runs.
        table.add_row(
            "runs pairwise",
            f"{format_count(run.flops)} FLOPs, largest intermediate "
            f"{format_count(run.largest_intermediate_elements)} elements "
            f"({format_bytes(run.largest_intermediate_elements * report.itemsize)})",
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


def gradients_table(report: Report) -> Table | None:
    """Each operand's gradient contraction; None without gradients."""
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
    rows = costliest(every, cost=lambda row: row[1].flops, order=lambda row: row[0].operand)
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


def strategies_table(report: Report) -> Table | None:
    """Each backward strategy's FLOPs, retained bytes and training peak; None without."""
    results = report.strategies
    if not results:
        return None
    least_flops = min(r.forward_flops + r.backward_flops for r in results)
    least_peak = min(r.memory.peak_bytes for r in results)
    inference = inference_peak(report)
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

def inference_peak(report: Report) -> int:
    """The inference peak as run, else the forward peak (inputs included)."""
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
            + ("; without --budget there is nothing to fit, so it slices nothing: give "
               "--budget BYTES to choose the slices"
               if section["count"] == 1 and report.budget is None else "")
        )
    return lines


def answer_line(report: Report) -> str:
    """One sentence answering: what does backward cost next to forward?"""
    inference = inference_peak(report)
    parts = [
        f"{r.name} backward = {r.backward_flops / max(r.forward_flops, 1):.2f}x forward FLOPs, "
        f"training peak {r.memory.peak_bytes / max(inference, 1):.2f}x the inference peak"
        for r in report.strategies
    ]
    return "; ".join(parts) + "."

