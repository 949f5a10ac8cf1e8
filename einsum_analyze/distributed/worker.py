"""One rank's work: join the group, run its slices, all-reduce, time and measure.

Runs in the rank's own process (:func:`.launch.launch`). Every rank draws the same
seeded operands and upstream gradient on its device, so nothing but the reduced
buffers crosses between processes. A timed step is::

    barrier | compute (the rank's slices) | barrier (wait) | collectives (communication)

so compute, waiting for the slowest rank, and communication are timed apart; the step
is their sum, read on rank 0. The collectives follow the job's ``communication``
(:mod:`.comm`): every buffer all-reduced, or parts gathered from their owners. With
``overlap`` a rank's broadcasts leave while its next slice runs, and there is no
barrier after compute: its communication is what is left once its slices are done,
waiting for a slower peer included (``wait`` is not measured apart). The device's
fence (``torch.cuda.synchronize``) closes every timed region. Memory is the
allocator's, as for single-device runs: on CUDA ``max_memory_allocated`` above the
baseline that holds the inputs, on cpu the torch.profiler allocator events; both plus
the inputs.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from functools import partial
from typing import TYPE_CHECKING, Any

from .comm import OUTPUT, CommPlan
from .contract import DistributedJob
from .launch import mark_progress

if TYPE_CHECKING:
    from ..backends.base import DeviceContext

__all__ = ["communication_plan", "rank_main", "reduce_buffers", "run_and_reduce"]


def reduce_buffers(output: Any | None, gradients: Mapping[int, Any], group: Any = None) -> None:
    """Sum the output and gradient buffers over the group, in place, all in flight at once."""
    import torch.distributed as dist

    buffers = ([] if output is None else [output]) + list(gradients.values())
    works = [dist.all_reduce(t, group=group, async_op=True) for t in buffers]
    for work in works:
        work.wait()


def communication_plan(runner: Any, assignment: Sequence[Sequence[int]],
                       communication: str) -> CommPlan | None:
    """The runner's plan of the step's collectives, or None.

    None for a runner that cannot plan them (it knows no slice geometry): its buffers
    are then all-reduced whole.
    """
    plan = getattr(runner, "communication_plan", None)
    return None if plan is None else plan(assignment, communication)


def run_and_reduce(job_runner: Any, slices: Sequence[int], operands: Sequence[Any],
                   upstream: Any, grad: Sequence[int], group: Any = None, *,
                   plan: CommPlan | None = None, rank: int = 0, is_cuda: bool = False,
                   timer: dict[str, float] | None = None) -> tuple[Any, Mapping[int, Any]]:
    """Run ``slices`` here and exchange: every rank then holds the whole result.

    Args:
        job_runner: The slice runner.
        slices: This rank's slices.
        operands: The operands on this rank's device.
        upstream: The upstream gradient (None: forward only).
        grad: The operands that need a gradient.
        group: The process group (None: the world).
        plan: The step's collectives (:func:`communication_plan`); None: all-reduce
            every buffer.
        rank: This rank (the plan's sources).
        is_cuda: Fence the device around the timed marks.
        timer: Filled with ``computed`` and ``waited`` (``perf_counter`` after the
            slices, after the barrier when there is one) for the timed steps.
    """
    import torch.distributed as dist

    from .collectives import Exchange

    exchange = None if plan is None else Exchange(plan, rank, len(slices), group)
    on_slice = (exchange.after_slice
                if exchange is not None and plan is not None and plan.communication == "overlap"
                else None)
    if on_slice is None:
        output, gradients = job_runner.run(slices, operands, upstream, grad)
    else:
        output, gradients = job_runner.run(slices, operands, upstream, grad, on_slice=on_slice)
    mark_progress(waiting=True)
    if timer is not None:
        _fence(is_cuda)
        timer["computed"] = time.perf_counter()
        if on_slice is None:
            dist.barrier(group=group)
            _fence(is_cuda)
        timer["waited"] = time.perf_counter()
    if exchange is None:
        reduce_buffers(output, gradients, group)
    else:
        exchange.finish({OUTPUT: output, **gradients})
    return output, gradients


def _fault_before_joining(job: DistributedJob, rank: int) -> None:
    """``backend``: a network interface that does not exist, so the backend fails to join."""
    if job.fault is not None and job.fault == (rank, "backend"):
        os.environ["GLOO_SOCKET_IFNAME"] = "no-such-interface0"
        os.environ["NCCL_SOCKET_IFNAME"] = "no-such-interface0"


def _fault(job: DistributedJob, rank: int) -> None:
    if job.fault is None or job.fault[0] != rank:
        return
    how = job.fault[1]
    if how == "raise":
        raise RuntimeError(f"injected failure on rank {rank}")
    if how == "exit":
        os._exit(3)
    if how == "kill":
        import signal

        os.kill(os.getpid(), signal.SIGKILL)
    if how == "hang":
        time.sleep(3600)
    if how == "stop":
        import signal

        os.kill(os.getpid(), signal.SIGSTOP)


def rank_main(rank: int, job: DistributedJob, devices: Sequence[str], backend: str,
              init_method: str, assignment: Sequence[Sequence[int]]) -> dict[str, Any]:
    """The body of rank ``rank``'s process; returns its figures as plain data."""
    import torch
    import torch.distributed as dist

    from ..backends.base import make_context

    device = devices[rank]
    is_cuda = device.startswith("cuda")
    if is_cuda:
        _check_device(device)
        torch.cuda.set_device(torch.device(device))
    else:
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // len(devices)))
    options: dict[str, Any] = {"device_id": torch.device(device)} if is_cuda else {}
    _fault_before_joining(job, rank)
    dist.init_process_group(backend, init_method=init_method, rank=rank,
                            world_size=len(devices), timeout=timedelta(seconds=job.timeout_s),
                            **options)
    try:
        mark_progress()
        _fault(job, rank)
        torch_device = device if is_cuda else "cpu"
        context = make_context(
            device=torch_device, dtype=job.dtype, shapes=job.shapes,
            output_shape=job.output_shape, text=job.text, explicit=job.explicit,
            seed=job.seed, grad=job.grad, check=job.check and rank == 0,
            scales=job.scales,
        )
        figures: dict[str, Any] = {"rank": rank, "device": device,
                                   "slices": list(assignment[rank])}
        everything = list(range(job.runner.slice_count))
        mark_progress()
        if job.baseline and rank == 0:
            figures["single"] = _single(job, context, everything, is_cuda, device)
        mark_progress(waiting=True)
        dist.barrier()
        mark_progress()
        mine = list(assignment[rank])
        modes = tuple(dict.fromkeys((job.communication, *job.compare)))
        plans = {mode: communication_plan(job.runner, assignment, mode) for mode in modes}
        if job.calibrate and len(devices) > 1:
            figures["collectives"] = _calibrate(context, len(devices), is_cuda,
                                                plans[job.communication])
        for _ in range(job.warmup):
            for mode in modes:
                _step(job, context, mine, is_cuda, plans[mode], rank)
        steps: dict[str, list[dict[str, float]]] = {mode: [] for mode in modes}
        for _ in range(job.repeats):  # the ways interleaved, step by step
            for mode in modes:
                steps[mode].append(_step(job, context, mine, is_cuda, plans[mode], rank))
        figures["modes"] = {mode: _mode_figures(job, context, mine, is_cuda, plans[mode], rank,
                                                len(devices), steps[mode])
                            for mode in modes}
        figures.update(figures["modes"][job.communication])
        output = figures.pop("_output")
        for mode_figures in figures["modes"].values():
            mode_figures.pop("_output", None)
        if rank == 0 and job.check:
            figures["output_error"] = _output_error(job, context, output)
        mark_progress(waiting=True)
        dist.barrier()
        return figures
    finally:
        dist.destroy_process_group()


def _mode_figures(job: DistributedJob, context: Any, mine: Sequence[int], is_cuda: bool,
                  plan: CommPlan | None, rank: int, devices: int,
                  steps: Sequence[Mapping[str, float]]) -> dict[str, Any]:
    """One way of communicating: its step medians, peaks, bytes and gradient error."""
    figures: dict[str, Any] = {}
    mark_progress(waiting=True)
    for key in ("compute_s", "wait_s", "communication_s", "step_s"):
        values = [s[key] for s in steps]
        figures[key] = statistics.median(values)
        figures[key + "_all"] = values
    if plan is not None and plan.communication == "overlap":
        figures["wait_s"] = None
    figures["peak_bytes_measured"] = _peak(
        lambda: run_and_reduce(job.runner, mine, context.operands, context.upstream,
                               job.grad, plan=plan, rank=rank), context)
    runner: Any = job.runner  # a runner that plans its collectives counts their packs
    figures["peak_bytes_predicted"] = (
        runner.predicted_peak_bytes(mine, is_cuda=is_cuda) if plan is None
        else runner.predicted_peak_bytes(mine, is_cuda=is_cuda, exchange=plan))
    output, gradients = run_and_reduce(job.runner, mine, context.operands,
                                       context.upstream, job.grad, plan=plan, rank=rank)
    figures["reduce_bytes"] = int(sum(t.untyped_storage().nbytes()
                                      for t in (output, *gradients.values())))
    figures["communication"] = "all-reduce" if plan is None else plan.communication
    figures["moved_bytes"] = (int(round(2 * (devices - 1) / devices * figures["reduce_bytes"]))
                              if plan is None else plan.received_bytes(rank))
    figures["calls"] = (1 + len(gradients)) if plan is None else plan.calls
    if rank == 0 and context.oracle:
        from ..backends.base import relative_error

        figures["max_grad_error"] = max(relative_error(gradients[k], context.oracle[k])
                                        for k in job.grad)
    mark_progress()
    figures["_output"] = output
    return figures


def _calibrate(context: Any, devices: int, is_cuda: bool,
               plan: CommPlan | None) -> dict[str, Any]:
    """The collectives alone, before the steps (:mod:`.projection` fits them).

    A barrier, and an all-reduce and a broadcast of one element and of the step's
    buffers' size (at least a MiB of elements).
    """
    import torch
    import torch.distributed as dist

    from .projection import fit_collective_costs

    like = context.operands[0]
    large = max(1 << 20, sum(plan.buffer_elements.values()) if plan is not None else 0)

    def timed(call: Callable[[], Any], times: int = 10) -> float:
        mark_progress(waiting=True)
        call()
        seconds = []
        for _ in range(times):
            dist.barrier()
            _fence(is_cuda)
            start = time.perf_counter()
            call()
            _fence(is_cuda)
            seconds.append(time.perf_counter() - start)
        mark_progress()
        return statistics.median(seconds)

    samples: dict[str, list[tuple[int, float]]] = {"all_reduce": [], "broadcast": []}
    for elements in (1, large):
        tensor = torch.zeros(elements, dtype=like.dtype, device=like.device)
        nbytes = elements * tensor.element_size()
        samples["all_reduce"].append((int(2 * (devices - 1) / devices * nbytes),
                                      timed(partial(dist.all_reduce, tensor))))
        samples["broadcast"].append((nbytes, timed(partial(dist.broadcast, tensor, 0))))
        del tensor
    barrier = timed(dist.barrier, 20)
    return {**fit_collective_costs(samples, barrier).to_dict(), "samples": samples}


def _check_device(device: str) -> None:
    """A GPU this process cannot see is refused in one line, before any CUDA call.

    Raises:
        einsum_analyze.errors.BackendUnavailableError: ``cuda:N`` beyond the GPUs this
            process sees (``CUDA_VISIBLE_DEVICES``, a GPU lost), or no CUDA at all.
    """
    import torch

    from ..errors import BackendUnavailableError

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    index = torch.device(device).index or 0
    if index >= count:
        raise BackendUnavailableError(f"{device} is missing: this process sees {count} CUDA "
                                      "device(s)")


def _fence(is_cuda: bool) -> None:
    if is_cuda:
        import torch

        torch.cuda.synchronize()


def _step(job: DistributedJob, context: Any, slices: Sequence[int], is_cuda: bool,
          plan: CommPlan | None, rank: int) -> dict[str, float]:
    import torch.distributed as dist

    mark_progress(waiting=True)
    dist.barrier()
    _fence(is_cuda)
    mark_progress()
    timer: dict[str, float] = {}
    start = time.perf_counter()
    run_and_reduce(job.runner, slices, context.operands, context.upstream, job.grad,
                   plan=plan, rank=rank, is_cuda=is_cuda, timer=timer)
    _fence(is_cuda)
    done = time.perf_counter()
    mark_progress()
    computed, waited = timer["computed"], timer["waited"]
    return {"compute_s": computed - start, "wait_s": waited - computed,
            "communication_s": done - waited, "step_s": done - start}


def _single(job: DistributedJob, context: Any, slices: Sequence[int],
            is_cuda: bool, device: str) -> dict[str, Any]:
    """Rank 0's device running every slice alone: the baseline of the speedup."""

    def once() -> tuple[Any, Mapping[int, Any]]:
        result: tuple[Any, Mapping[int, Any]] = job.runner.run(
            slices, context.operands, context.upstream, job.grad)
        return result

    for _ in range(job.warmup):
        once()
        mark_progress()
    _fence(is_cuda)
    times = []
    for _ in range(job.repeats):
        start = time.perf_counter()
        once()
        _fence(is_cuda)
        times.append(time.perf_counter() - start)
        mark_progress()
    return {"device": device, "slices": len(slices),
            "seconds": statistics.median(times), "seconds_all": times,
            "peak_bytes_measured": _peak(once, context),
            "peak_bytes_predicted": job.runner.predicted_peak_bytes(slices, is_cuda=is_cuda)}


def _peak(call: Callable[[], Any], context: DeviceContext) -> int:
    """The allocator's peak of ``call``, inputs included."""
    from ..backends.torch_backend import allocator_peak

    return allocator_peak(call, context) + int(context.input_bytes)


def _output_error(job: DistributedJob, context: Any, output: Any) -> float:
    import torch

    from ..backends.base import oracle_dtype, relative_error
    from ..backends.relabel import contract_along_path, torch_equation

    precise = [t.detach().to(oracle_dtype(job.dtype)) for t in context.operands]
    equation = torch_equation(job.text, job.explicit)
    want = (torch.einsum(equation, *precise) if equation is not None
            else contract_along_path(job.explicit, precise))
    return relative_error(output.reshape(want.shape), want)
