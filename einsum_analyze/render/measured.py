"""Terminal tables of the runs: times, measured peaks, and why runs were skipped."""

from __future__ import annotations

from rich import box
from rich.table import Table

from ..backends.base import Run
from ..report.report import Report
from .formatting import format_bytes, format_seconds

__all__ = ["runs_table", "skip_lines"]


def runs_table(report: Report) -> Table | None:
    """One row per run: median times, measured and predicted peaks; None without runs."""
    if not report.runs:
        return None
    bases = dict.fromkeys(part.strip() for r in report.runs if r.memory_measurement
                          for part in r.memory_measurement.split(";"))
    scales = report.environment.get("operand_scales")
    scaled = (f"; {report.dtype} operands: N(0, 1) times {min(scales):.3g} to "
              f"{max(scales):.3g} per operand, so that sums stay finite" if scales else "")
    table = Table(
        title="Runs (median per call; * fastest forward+backward, + leanest measured peak)",
        caption="model: the time model's forward + backward on the device's calibration; "
        "peak: measured, inputs included; retained: measured, kept for backward; "
        "predicted: the model's peak, inputs included; vs torch: time, then peak, over "
        "torch-autograd's on the same device; the JSON report has the spreads. Memory "
        "measured by: " + ("; ".join(bases) or "-") + scaled,
        box=box.SIMPLE_HEAD,
        padding=(0, 1, 0, 0),
        pad_edge=False,  # two columns more fit: the table reads whole at 120 columns
    )
    for header in ("strategy", "device", "fwd", "bwd", "fwd+bwd", "model", "peak", "predicted",
                   "retained", "grad err", "vs torch"):
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
            table.add_row(name, run.device, "skipped", "-", "-", "-", "-",
                          format_bytes(run.peak_bytes_predicted)
                          if run.peak_bytes_predicted is not None else "-")
            continue
        time_s = total(run)
        peak = "-"
        if run.peak_bytes_measured is not None:
            peak = format_bytes(run.peak_bytes_measured)
            peak += "+" if run.peak_bytes_measured == leanest.get(run.device) else ""
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
            format_seconds(run.backward.median_s) if run.backward else "-",
            format_seconds(time_s) + ("*" if time_s == fastest[run.device] else ""),
            format_seconds(run.predicted.total_s) if run.predicted is not None else "-",
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

def skip_lines(report: Report) -> list[str]:
    """One line per reason runs were skipped: ``skipped reverse, independent on cpu: ...``."""
    reasons: dict[tuple[str, str], list[str]] = {}
    for run in report.runs:
        if run.skipped is not None:
            reasons.setdefault((run.device, run.skipped), []).append(run.strategy)
    return [f"skipped {', '.join(names)} on {device}: {reason}"
            for (device, reason), names in reasons.items()]

