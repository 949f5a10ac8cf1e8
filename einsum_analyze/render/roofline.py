"""Terminal tables of the roofline and of the per-step times. Formats only.

``render_roofline`` prints every strategy's bound (``--roofline``, or the calibrated
profile after a run); ``render_step_times`` prints, for every run that timed its steps
(``--profile-steps``), the costliest steps first.
"""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..backends.base import Run
from ..report.report import Report
from ..roofline import DeviceProfile
from .formatting import format_bytes, format_count, format_seconds
from .report import fit, wrap_equation

__all__ = ["TOP_STEPS", "percent", "profile_line", "render_roofline", "render_step_times"]

TOP_STEPS = 10
"""Rows of the costliest-steps table (the JSON report carries every step)."""

STEP_FIGURES_WIDTH = 48
"""Columns the time, share, bound and efficiency take; the step's text wraps in the rest."""


def _rate(value: float) -> str:
    for unit, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6)):
        if value >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value:.3g} "


def profile_line(profile: DeviceProfile, dtype: str) -> str:
    """``NOMINAL h200: 4.8 TB/s, 67 TFLOP/s float32, 5 us/kernel`` (or CALIBRATED, FILE)."""
    return (f"{profile.source.upper()} {profile.name}: "
            f"{_rate(profile.bandwidth_bytes_per_s)}B/s, "
            f"{_rate(profile.rate(dtype))}FLOP/s {dtype}"
            + (f", {format_seconds(profile.launch_s)}/kernel" if profile.launch_s > 0 else ""))


def _roofline_table(report: Report) -> Table | None:
    roofline = report.roofline
    if roofline is None or not roofline.strategies:
        return None
    table = Table(
        # A profile file's name is the user's text, not markup ("[/x]" would raise).
        title=f"Roofline ({escape(profile_line(roofline.profile, roofline.dtype))})",
        caption="bound: sum over the steps of max(FLOPs / rate, bytes / bandwidth); "
        "predicted: the time model's (each step's kernels, its copies and launches, and "
        "the host's costs around them); "
        "FLOPs: what the lowered kernels do, then opt_einsum's convention; moved: inputs "
        "read once and outputs written once (a narrow product's k times); copies: extra "
        "bytes of layout copies, not in the bound",
        box=box.SIMPLE_HEAD,
        padding=(0, 1, 0, 0),
    )
    for header in ("strategy", "bound", "fwd", "bwd", "predicted", "FLOPs", "convention",
                   "moved", "copies"):
        table.add_column(header, justify="left" if header == "strategy" else "right",
                         no_wrap=True)
    for row in roofline.strategies:
        table.add_row(
            row.strategy,
            format_seconds(row.bound_s()),
            format_seconds(row.bound_s("forward")),
            format_seconds(row.bound_s("backward")),
            format_seconds(row.predicted.total_s),
            format_count(sum(s.flops for s in row.steps)),
            format_count(sum(s.flops_convention for s in row.steps)),
            format_bytes(sum(s.bytes for s in row.steps)),
            format_bytes(sum(s.copy_bytes for s in row.steps)),
        )
    return table


def render_roofline(report: Report, console: Console) -> None:
    """Print every strategy's roofline bound, if the report has a roofline."""
    table = _roofline_table(report)
    if table is not None:
        console.print(fit(table, console))


def steps_table(report: Report, run: Run, width: int) -> Table:
    strategy = next((s for s in report.strategies if s.name == run.strategy), None)
    equations = {n: e.equation for n, e in enumerate(strategy.events)} if strategy else {}
    total = sum(step.time_s for step in run.steps) + (run.other_s or 0.0)
    costliest = sorted(run.steps, key=lambda step: step.time_s, reverse=True)[:TOP_STEPS]
    shown = (f"top {len(costliest)} of {len(run.steps)}" if len(costliest) < len(run.steps)
             else f"all {len(run.steps)}")
    title = (f"Costliest steps: {run.strategy} on {run.device} ({shown}; steps add up to "
             f"{format_seconds(total)} with {format_seconds(run.other_s or 0.0)} between them)")
    table = Table(
        title=title,
        # As wide as the title where the console allows: a title wrapped to a narrow
        # table splits its figures from their units ("140 / ms").
        min_width=min(len(title), width),
        caption="time: median per call; share: of forward + backward; bound: the roofline "
        "on the device's calibration; model: the time model there; efficiency: bound / "
        "time",
        box=box.SIMPLE_HEAD,
        padding=(0, 1, 0, 0),
    )
    for header in ("step", "time", "share", "bound", "model", "eff"):
        table.add_column(header, justify="left" if header == "step" else "right",
                         no_wrap=True)
    for step in costliest:
        phase = "fwd" if step.phase == "forward" else "bwd"
        equation = equations.get(step.event)
        text = f"#{step.event} {phase} {step.tensor}" + (f" = {equation}" if equation else "")
        table.add_row(
            wrap_equation(text, max(20, width - STEP_FIGURES_WIDTH)),
            format_seconds(step.time_s),
            percent(step.time_s / total) if total > 0 else "-",
            format_seconds(step.bound_s) if step.bound_s is not None else "-",
            format_seconds(step.predicted_s) if step.predicted_s is not None else "-",
            percent(step.bound_s / step.time_s)
            if step.bound_s is not None and step.time_s > 0 else "-",
        )
    return table


def percent(ratio: float) -> str:
    """``12%``; below 1%, two significant figures (``0.091%``): a small ratio is not 0%."""
    if ratio == 0 or ratio >= 0.01:
        return f"{ratio:.0%}"
    return f"{ratio * 100:.2g}%"


def render_step_times(report: Report, console: Console) -> None:
    """Print the calibrated roofline, then each run's costliest steps (``--profile-steps``).

    A roofline on a given profile (``--roofline``) was printed with the analysis already.
    """
    if report.roofline is not None and report.roofline.profile.source == "calibrated":
        render_roofline(report, console)
    timed = [run for run in report.runs if run.steps]
    if report.runs and not timed:
        console.print("no step was timed: --profile-steps needs --backend torch",
                      highlight=False)
    for run in timed:
        console.print(fit(steps_table(report, run, console.width), console))
