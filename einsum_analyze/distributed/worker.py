"""One rank's work: join the group, run its slices, all-reduce, time and measure.

Runs in the rank's own process (:func:`.launch.launch`). Every rank draws the same
seeded operands and upstream gradient on its device, so nothing but the reduced
buffers crosses between processes. A timed step is::

    barrier | compute (the rank's slices) | barrier (wait) | all_reduce (communication)

so compute, waiting for the slowest rank, and communication are timed apart; the step
is their sum, read on rank 0. The device's fence (``torch.cuda.synchronize``) closes
every timed region. Memory is the allocator's, as for single-device runs: on CUDA
``max_memory_allocated`` above the baseline that holds the inputs, on cpu the
torch.profiler allocator events; both plus the inputs.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from .contract import DistributedJob

if TYPE_CHECKING:
    from ..backends.base import DeviceContext

__all__ = ["rank_main", "reduce_buffers", "run_and_reduce"]


def reduce_buffers(output: Any | None, gradients: Mapping[int, Any], group: Any = None) -> None:
    """Sum the output and gradient buffers over the group, in place, all in flight at once."""
    import torch.distributed as dist

    buffers = ([] if output is None else [output]) + list(gradients.values())
    works = [dist.all_reduce(t, group=group, async_op=True) for t in buffers]
    for work in works:
        work.wait()


def run_and_reduce(job_runner: Any, slices: Sequence[int], operands: Sequence[Any],
                   upstream: Any, grad: Sequence[int],
                   group: Any = None) -> tuple[Any, Mapping[int, Any]]:
    """Run ``slices`` here and all-reduce: every rank then holds the whole result."""
    output, gradients = job_runner.run(slices, operands, upstream, grad)
    reduce_buffers(output, gradients, group)
    return output, gradients


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


def rank_main(rank: int, job: DistributedJob, devices: Sequence[str], backend: str,
              init_method: str, assignment: Sequence[Sequence[int]]) -> dict[str, Any]:
    """The body of rank ``rank``'s process; returns its figures as plain data."""
    import torch
    import torch.distributed as dist

    from ..backends.base import make_context

    device = devices[rank]
    is_cuda = device.startswith("cuda")
    if is_cuda:
        torch.cuda.set_device(torch.device(device))
    else:
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // len(devices)))
    options: dict[str, Any] = {"device_id": torch.device(device)} if is_cuda else {}
    dist.init_process_group(backend, init_method=init_method, rank=rank,
                            world_size=len(devices), timeout=timedelta(seconds=job.timeout_s),
                            **options)
    try:
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
        if job.baseline and rank == 0:
            figures["single"] = _single(job, context, everything, is_cuda, device)
        dist.barrier()
        mine = list(assignment[rank])
        for _ in range(job.warmup):
            _step(job, context, mine, is_cuda)
        steps = [_step(job, context, mine, is_cuda) for _ in range(job.repeats)]
        for key in ("compute_s", "wait_s", "communication_s", "step_s"):
            values = [s[key] for s in steps]
            figures[key] = statistics.median(values)
            figures[key + "_all"] = values
        figures["peak_bytes_measured"] = _peak(
            lambda: run_and_reduce(job.runner, mine, context.operands, context.upstream,
                                   job.grad), context)
        figures["peak_bytes_predicted"] = job.runner.predicted_peak_bytes(mine, is_cuda=is_cuda)
        output, gradients = run_and_reduce(job.runner, mine, context.operands,
                                           context.upstream, job.grad)
        figures["reduce_bytes"] = int(sum(t.untyped_storage().nbytes()
                                          for t in (output, *gradients.values())))
        if rank == 0 and context.oracle:
            from ..backends.base import relative_error

            figures["max_grad_error"] = max(relative_error(gradients[k], context.oracle[k])
                                            for k in job.grad)
        if rank == 0 and job.check:
            figures["output_error"] = _output_error(job, context, output)
        dist.barrier()
        return figures
    finally:
        dist.destroy_process_group()


def _fence(is_cuda: bool) -> None:
    if is_cuda:
        import torch

        torch.cuda.synchronize()


def _step(job: DistributedJob, context: Any, slices: Sequence[int],
          is_cuda: bool) -> dict[str, float]:
    import torch.distributed as dist

    dist.barrier()
    _fence(is_cuda)
    start = time.perf_counter()
    output, gradients = job.runner.run(slices, context.operands, context.upstream, job.grad)
    _fence(is_cuda)
    computed = time.perf_counter()
    dist.barrier()
    _fence(is_cuda)
    waited = time.perf_counter()
    reduce_buffers(output, gradients)
    _fence(is_cuda)
    done = time.perf_counter()
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
    _fence(is_cuda)
    times = []
    for _ in range(job.repeats):
        start = time.perf_counter()
        once()
        _fence(is_cuda)
        times.append(time.perf_counter() - start)
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
