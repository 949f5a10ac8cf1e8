"""``--devices``: the sliced plan's slices spread over devices, one process each.

:mod:`.command` adds the option (:data:`DEVICES_HELP`), reads it with
:func:`check_devices` before any analysis, and after the analysis (and any ``--device``
runs) calls :func:`run_devices`, then
:func:`~einsum_analyze.render.distributed.render_distributed`. The JSON report gains a
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
    from ..distributed import DeviceList, DistributedResult
    from ..report.report import Report

__all__ = ["DEVICES_HELP", "check_devices", "check_run_devices", "run_devices", "runs_on_cpu"]

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
    from ..distributed.devices import parse_devices

    return parse_devices(text)


def check_run_devices(devices: tuple[str, ...] | None, backend: str, dtype: str) -> None:
    """Refuse a ``--device`` that is not there before anything prints (exit 2).

    ``devices`` is :meth:`~.options.RunOptions.device_list`'s answer: ``()`` runs nothing
    and is not checked; ``None`` is the default device. torch is imported only here,
    when runs were asked for.

    Raises:
        einsum_analyze.errors.BackendUnavailableError: A device this machine lacks, or one
            the backend cannot run with ``dtype``.
    """
    if devices == ():
        return
    from ..backends import get_backend
    from ..errors import BackendUnavailableError
    from ..execution import resolve_devices

    executor = get_backend(backend)
    for device in resolve_devices(devices):
        reason = executor.unavailable(device, dtype)
        if reason is not None:
            raise BackendUnavailableError(reason)


def runs_on_cpu(devices: tuple[str, ...] | None) -> bool:
    """Whether the ``--device`` list (None: the default) includes the cpu."""
    if devices == ():
        return False
    from ..execution import resolve_devices

    return "cpu" in resolve_devices(devices)


def run_devices(report: Report, devices: DeviceList, *, repeats: int, warmup: int,
                seed: int, timeout_s: float = 600.0) -> DistributedResult:
    """Run the report's ``sliced`` strategy across ``devices``.

    Raises:
        einsum_analyze.errors.PlanningError: The report has no ``sliced`` strategy.
    """
    from ..distributed.contract import DistributedJob
    from ..distributed.from_report import runner_for
    from ..distributed.run import run_distributed
    from ..execution import operand_scales

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
