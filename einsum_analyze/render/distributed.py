"""Terminal rendering of a distributed run (``--devices``): per device, then the speedup."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich import box
from rich.markup import escape
from rich.table import Table

from .formatting import format_bytes, format_seconds
from .layout import fit, plural

if TYPE_CHECKING:
    from rich.console import Console

    from ..distributed import DistributedResult

__all__ = ["render_distributed"]


def render_distributed(result: DistributedResult, out: Console, err: Console) -> None:
    """The per-device table and the speedup line; a failed rank's error on ``err``."""

    def seconds(value: float | None) -> str:
        return format_seconds(value) if value is not None else "-"

    def size(value: int | None) -> str:
        return format_bytes(value) if value is not None else "-"

    table = Table(
        title=f"Sliced step on {plural(len(result.devices), 'device')} ({result.backend}): "
        f"{plural(result.slice_count, 'slice')}",
        caption="median per step; wait: for the slowest device before the collectives; "
        "comm: the collectives of the output and gradients; peak: measured, inputs included",
        box=box.SIMPLE_HEAD, padding=(0, 1, 0, 0))
    for header in ("device", "slices", "compute", "wait", "comm", "peak", "predicted"):
        table.add_column(header, justify="left" if header == "device" else "right",
                         no_wrap=True)
    for d in result.per_device:
        table.add_row(d.device, str(len(d.slices)), seconds(d.compute_s), seconds(d.wait_s),
                      seconds(d.communication_s), size(d.peak_bytes_measured),
                      size(d.peak_bytes_predicted))
    single = result.single_device
    if single is not None:
        table.add_row(f"{single['device']} alone", str(single["slices"]),
                      seconds(single["seconds"]), "-", "-",
                      size(single["peak_bytes_measured"]), size(single["peak_bytes_predicted"]))
    out.print(fit(table, out))
    if result.calls is not None and result.moved_bytes is not None:
        out.print(_communication_line(result), highlight=False)
    if result.speedup is not None and result.efficiency is not None:
        error = (f", grad err {result.max_grad_error:.1e}"
                 if result.max_grad_error is not None else "")
        verdict = ("faster" if result.speedup > 1 else
                   "slower" if result.speedup < 1 else "as fast")
        out.print(f"step {seconds(result.step_s)} on {plural(len(result.devices), 'device')}: "
                  f"speedup {_ratio(result.speedup)}x over one device alone ({verdict}), "
                  f"efficiency {_ratio(result.efficiency)}{error}", highlight=False)
    if result.failure is not None:
        # One line, the rank that caused it first. A rank's error quotes gloo's source
        # paths, "[/__w/pytorch/...]": not markup.
        err.print(f"[red]error:[/red] distributed run failed: {escape(result.failure)}",
                  highlight=False, soft_wrap=True)


def _ratio(value: float) -> str:
    """``1.85``; below 0.1 two significant figures (``0.0043``), never ``0.00``."""
    return f"{value:.2f}" if value == 0 or value >= 0.1 else f"{value:.2g}"


def _communication_line(result: DistributedResult) -> str:
    """``gather: 3 collective calls per step, at most 1.2 KiB received per device ...``."""
    what = {"gather": "parts of sliced buffers from their owners, the rest summed",
            "overlap": "parts of sliced buffers from their owners while later slices run, "
                       "the rest summed",
            "all-reduce": "every buffer summed whole"}.get(result.communication or "", "")
    line = (f"{result.communication} ({what}): {plural(result.calls or 0, 'collective call')}"
            f" per step, at most {format_bytes(result.moved_bytes or 0)} received per device")
    n = len(result.devices)
    if result.communication != "all-reduce" and result.reduce_bytes and n > 1:
        whole = int(round(2 * (n - 1) / n * result.reduce_bytes))
        line += f" (an all-reduce of every buffer: {format_bytes(whole)})"
    return line
