"""``--devices``: the sliced plan's slices spread over devices, one process each.

cli.py adds the option (:data:`DEVICES_HELP`), reads it with :func:`check_devices`
before any analysis, and after the analysis (and any ``--device`` runs) calls
:func:`run_devices` and :func:`render_distributed`. The JSON report gains a
``distributed`` section (docs/schema.md).

``--device`` and ``--devices`` are independent: ``--device`` says where every
strategy runs on its own (single-device runs, the ``runs`` table); ``--devices`` runs
the ``sliced`` strategy's slices across the listed devices, with one of them also
running every slice alone as the speedup's baseline. Given ``--devices`` without
``--device``, only the distributed run happens (``--device`` then defaults to none).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

    from .distributed import DeviceList, DistributedResult
    from .report import Report

__all__ = ["DEVICES_HELP", "check_devices", "render_distributed", "run_devices"]

DEVICES_HELP = (
    "Run the sliced strategy's slices across devices, one process each (torch.distributed: "
    "NCCL on GPUs, gloo on cpu): cuda:0,cuda:1, all (every GPU), or cpu*2 (cpu:0,cpu:1: "
    "two cpu processes). Slices are assigned by cost; the output and gradients are "
    "all-reduced; the report gives each device's time and peak, the communication time, "
    "and the speedup over one device running the same slices. Independent of --device "
    "(single-device runs of every strategy), which defaults to none when --devices is "
    "given (docs/distributed.md)."
)


def check_devices(text: str | None) -> DeviceList | None:
    """The parsed ``--devices`` (None when absent); bad lists raise before any work.

    Raises:
        einsum_analyze.errors.BackendUnavailableError: A device that does not exist, a
            mixed or repeated list.
    """
    if text is None:
        return None
    from .distributed.devices import parse_devices

    return parse_devices(text)


def run_devices(report: Report, devices: DeviceList, *, repeats: int, warmup: int,
                seed: int, timeout_s: float = 600.0) -> DistributedResult:
    """Run the report's ``sliced`` strategy across ``devices``.

    Raises:
        einsum_analyze.errors.PlanningError: The report has no ``sliced`` strategy.
    """
    from .distributed.contract import DistributedJob
    from .distributed.from_report import runner_for
    from .distributed.run import run_distributed
    from .execution import operand_scales

    runner = runner_for(report)
    eq = report.equation
    grad = report.gradients.operands if report.gradients is not None else report.grad_operands
    job = DistributedJob(
        runner=runner, text=eq.text, explicit=eq.explicit,
        shapes=tuple(tuple(shape) for shape in eq.shapes),
        output_shape=tuple(eq.size_dict[c] for c in eq.output), dtype=report.dtype,
        grad=tuple(grad), seed=seed, scales=tuple(operand_scales(report)),
        repeats=repeats, warmup=warmup, timeout_s=timeout_s,
    )
    return run_distributed(job, devices)


def render_distributed(result: DistributedResult, out: Console, err: Console) -> None:
    """The per-device table and the speedup line; a failed rank's error on ``err``."""
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    from .formatting import format_bytes, format_seconds
    from .render import fit, plural

    def seconds(value: float | None) -> str:
        return format_seconds(value) if value is not None else "-"

    def size(value: int | None) -> str:
        return format_bytes(value) if value is not None else "-"

    table = Table(
        title=f"Sliced step on {plural(len(result.devices), 'device')} ({result.backend}): "
        f"{plural(result.slice_count, 'slice')}",
        caption="median per step; wait: for the slowest device before the all-reduce; "
        "comm: all-reduce of the output and gradients; peak: measured, inputs included",
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
    if result.speedup is not None and result.efficiency is not None:
        error = (f", grad err {result.max_grad_error:.1e}"
                 if result.max_grad_error is not None else "")
        out.print(f"step {seconds(result.step_s)} on {plural(len(result.devices), 'device')}: "
                  f"{_ratio(result.speedup)}x one device, efficiency "
                  f"{_ratio(result.efficiency)}{error}", highlight=False)
    for line in result.errors:
        # A rank's error quotes gloo's source paths, "[/__w/pytorch/...]": not markup.
        err.print(f"[red]error:[/red] distributed run failed: {escape(line)}", highlight=False)


def _ratio(value: float) -> str:
    """``1.85``; below 0.1 two significant figures (``0.0043``), never ``0.00``."""
    return f"{value:.2f}" if value == 0 or value >= 0.1 else f"{value:.2g}"
