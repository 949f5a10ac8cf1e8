"""The torch backend: runs a compiled schedule (:mod:`.torch_kernels`) on cpu or CUDA.

:func:`run_compiled` is the one function that runs a compiled schedule's events: the
production runs (:class:`TorchExecutor`) and the exact-memory tests
(:func:`run_schedule`) both go through it.

Memory is the allocator's: on CUDA ``torch.cuda.max_memory_allocated``, on cpu the
allocation and free events that ``torch.profiler`` records with ``profile_memory``
(their running total and its maximum). The profiler never runs in a timed call.

torch is imported inside the functions: importing this module costs nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..model.memory import Event
from .base import CALLER_UPSTREAM, DeviceContext, MemoryFigures, allocated_bytes
from .relabel import ascii_equation
from .torch_kernels import CompiledSchedule, Live, Op, compile_schedule

__all__ = [
    "CompiledSchedule",
    "ExecutionResult",
    "TorchExecutor",
    "allocator_peak_cpu",
    "ascii_equation",
    "compile_schedule",
    "emptied_cache",
    "fresh_segments",
    "hand_upstream",
    "held_bytes",
    "run_compiled",
    "run_schedule",
]

OnEvent = Callable[[Live, list[Any], bool], None]
"""Called at each event's high point (its temporaries alive, ``True``) and after it."""

CPU_BASIS = "cpu allocator events (torch.profiler, profile_memory)"
CUDA_BASIS = "torch.cuda.max_memory_allocated"


def run_compiled(ops: Sequence[Op], live: Live, on_event: OnEvent | None = None,
                 on_step: Callable[[], None] | None = None) -> Live:
    """Run compiled events on the live tensors (updated in place) and return them.

    Args:
        ops: ``CompiledSchedule.forward``, ``.backward`` or both, in order.
        live: Tensors by name: the operands ``in0``, ``in1``, ... and, before the
            backward events, a fresh ``upstream`` gradient that the seed takes over.
        on_event: A hook for the exact-memory tests; None in production runs.
        on_step: Called after each event (``--profile-steps`` marks the time there).
    """
    import torch

    with torch.no_grad():
        if on_step is not None:
            for op in ops:
                kept = op(live, [])
                if kept:
                    live.update(kept)
                on_step()
            return live
        if on_event is None:
            for op in ops:
                kept = op(live, [])
                if kept:
                    live.update(kept)
            return live
        for op in ops:
            workspace: list[Any] = []
            kept = op(live, workspace)
            on_event(live, workspace, True)
            if kept:
                live.update(kept)
            del workspace
            on_event(live, [], False)
    return live


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutionResult:
    """What running a schedule produced.

    Attributes:
        output: The forward result.
        gradients: Gradient of each differentiated operand, by position.
        live_bytes: Bytes held after every event (operands included), counted over
            distinct storages.
        high_bytes: Bytes held at the high point of every event (its output and its
            temporaries allocated).
    """

    output: Any
    gradients: Mapping[int, Any]
    live_bytes: tuple[int, ...]
    high_bytes: tuple[int, ...]


def _held_bytes(tensors: Sequence[Any]) -> int:
    seen: dict[int, int] = {}
    for tensor in tensors:
        storage = tensor.untyped_storage()
        seen[storage.data_ptr()] = storage.nbytes()
    return sum(seen.values())


def run_schedule(
    events: Sequence[Event],
    operands: Sequence[Any],
    upstream: Any,
    size_dict: Mapping[str, int],
    *,
    track_memory: bool = True,
) -> ExecutionResult:
    """Run ``events`` with torch through :func:`run_compiled`, counting the tensors held.

    For tests: the count over distinct storages, after and during every event, checks
    the schedule's replay event by event (the allocator's figure is checked by
    :func:`allocator_peak_cpu`).

    Args:
        events: A strategy's schedule (lowered, or not: unlowered contractions run as
            torch.einsum).
        operands: The caller's tensors, in operand order, contiguous.
        upstream: The caller's upstream gradient, contiguous in the output's labels. The
            seed takes it as it is (a complex one is copied: the seed conjugates it in
            place); it counts from the seed on, held by the caller to the end.
        size_dict: Size of every label.
        track_memory: Count the bytes held after and during every event.

    Returns:
        The :class:`ExecutionResult`.
    """
    compiled = compile_schedule(events, size_dict)
    live: Live = {f"in{k}": t for k, t in enumerate(operands)}
    live["upstream"] = _seed_of(upstream)
    after: list[int] = []
    high: list[int] = []

    def count(state: Live, workspace: list[Any], at_high: bool) -> None:
        tensors = [t for n, t in state.items() if n != "upstream"] + workspace
        if "upstream" not in state:  # the seed has run: the caller's gradient counts
            tensors.append(upstream)
        (high if at_high else after).append(_held_bytes(tensors))

    run_compiled(compiled.forward + compiled.backward, live, count if track_memory else None)
    gradients = {int(name[1:]): t for name, t in live.items() if name.startswith("d")}
    return ExecutionResult(output=live[compiled.final_output], gradients=gradients,
                           live_bytes=tuple(after), high_bytes=tuple(high))


def allocator_peak(call: Callable[[], Any], context: DeviceContext) -> int:
    """The allocator's peak while ``call`` runs, above what was held before it.

    CUDA: ``max_memory_allocated`` after a reset, fenced on both sides, on an emptied
    cache (:func:`emptied_cache`), the call's blocks carved from fresh segments of a
    private pool of its own (:func:`fresh_segments`); cpu: the profiler's allocator
    events (:func:`allocator_peak_cpu`). What ``call`` returns is held until the peak is
    read.
    """
    if not context.is_cuda:
        peak, _ = allocator_peak_cpu(call)
        return int(peak)
    import torch

    index = torch.device(context.device).index or 0
    context.fence()
    emptied_cache()
    torch.cuda.reset_peak_memory_stats(index)
    base = torch.cuda.memory_allocated(index)
    with fresh_segments(index):
        kept = call()
        context.fence()
        peak = torch.cuda.max_memory_allocated(index) - base
        del kept
    return int(peak)


@contextlib.contextmanager
def fresh_segments(index: int) -> Iterator[None]:
    """The calling thread's CUDA allocations inside go to a new private pool.

    The caching allocator hands a cached block out whole where at most 1 MiB of it would
    be left over, and ``memory_allocated`` counts the remainder. :func:`emptied_cache`
    gives back the segments nothing holds, but a segment that also holds a live tensor
    (an operand, or whatever the process keeps) stays, with its free blocks: after other
    work in the process, ``reverse`` on ``tn18-b65536-bond64`` measured exactly 1 MiB
    over its prediction (H200, 2026-12-02), equal to it in a fresh process. A pool of
    the call's own has no such blocks, so the call measures as in a fresh process,
    whatever ran before. Without ``torch.cuda.MemPool`` (an older torch), the call
    allocates as before.
    """
    import torch

    make = getattr(torch.cuda, "MemPool", None)
    use = getattr(torch.cuda, "use_mem_pool", None)
    if make is None or use is None:
        yield
        return
    pool = make()
    with use(pool, torch.device("cuda", index)):
        yield
    del pool


def emptied_cache() -> None:
    """Give the CUDA allocator's unused cached segments back before a measured run.

    The caching allocator hands a cached block out whole where at most 1 MiB of it would
    be left over, and ``memory_allocated`` counts that remainder: with the blocks an
    earlier run of the process left cached, the same schedule measured up to 1 MiB more
    per allocation (``recompute`` on ``tn18-b65536-bond64``: exactly 1 MiB over its
    prediction after other tests, equal to it in a fresh process). Blocks carved from
    fresh segments are what the model counts; segments that a live tensor keeps are
    :func:`fresh_segments`' concern.
    """
    import torch

    torch.cuda.empty_cache()


def allocator_peak_cpu(call: Callable[[], Any]) -> tuple[int, int]:
    """Run ``call`` under ``torch.profiler`` and read the cpu allocator's events.

    The garbage collector does not run during the call: a collection there frees
    tensors of earlier calls, whose frees the profiler records (a 56 B step read 48 B).

    Returns:
        The largest running total of the bytes allocated minus freed during the call,
        and the total at its end (what the call's result still holds).
    """
    import gc
    import os

    from torch.profiler import ProfilerActivity, profile

    # Kineto prints two lines to stderr per profile at its default level; 6 silences it.
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")

    collecting = gc.isenabled()
    gc.disable()
    try:
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            kept = call()
        del kept
    finally:
        if collecting:
            gc.enable()
    changes = sorted(
        (event.start_ns(), position, event.nbytes())
        for position, event in enumerate(prof.profiler.kineto_results.events())
        if event.name() == "[memory]" and str(event.device_type()) == "DeviceType.CPU"
    )
    total = peak = 0
    for _, _, nbytes in changes:
        total += nbytes
        peak = max(peak, total)
    return peak, total


def hand_upstream(state: Live, context: DeviceContext) -> Live:
    """A fresh copy of the context's upstream gradient, handed over as a caller hands it.

    The caller holds it (``CALLER_UPSTREAM``) until backward returns, and the seed reads
    it in place (a complex one is copied: the seed conjugates it in place). Returns
    ``state``, updated.
    """
    upstream = context.upstream.clone()
    state[CALLER_UPSTREAM] = upstream
    state["upstream"] = _seed_of(upstream)
    return state


def _seed_of(upstream: Any) -> Any:
    """What the seed takes: the caller's gradient, or a copy of a complex one."""
    return upstream.clone() if upstream.is_complex() else upstream


@dataclass(frozen=True, slots=True)
class _Program:
    compiled: CompiledSchedule
    context: DeviceContext


class TorchExecutor:
    """Our schedules with torch on cpu and CUDA (registered as ``torch``)."""

    name = "torch"

    def unavailable(self, device: str, dtype: str) -> str | None:
        """Torch runs every dtype on cpu and CUDA."""
        return None

    def compile(self, events: Sequence[Event], sizes: Mapping[str, int],
                context: DeviceContext) -> _Program:
        """Compile the schedule once."""
        return _Program(compile_schedule(events, sizes), context)

    def forward(self, program: _Program) -> Live:
        """The forward events on the operands."""
        live = {f"in{k}": t for k, t in enumerate(program.context.operands)}
        return run_compiled(program.compiled.forward, live)

    def prepare_backward(self, program: _Program, state: Live) -> Live:
        """The caller's upstream gradient, made fresh between the phases, for the seed.

        It stands for what a caller gives (``autograd.grad``'s argument, or the tensor
        the autograd engine hands a node's backward): the state holds it until backward
        returns, as those callers do, and the seed reads it in place (a complex one gets
        a copy: the seed conjugates it in place). torch autograd's run
        (:mod:`.baselines`) makes and holds its upstream gradient the same way.
        """
        return hand_upstream(state, program.context)

    def backward(self, program: _Program, state: Live) -> Live:
        """The backward events."""
        return run_compiled(program.compiled.backward, state)

    def has_backward(self, program: _Program) -> bool:
        """Whether anything is differentiated."""
        return bool(program.compiled.backward)

    def gradients(self, program: _Program, state: Live) -> Mapping[int, Any]:
        """The gradients, by operand position."""
        return {k: state[f"d{k}"] for k in program.context.grad}

    def _both(self, program: _Program) -> Live:
        if not self.has_backward(program):
            return self.forward(program)  # no upstream gradient: nothing to take it
        return self.backward(program, self.prepare_backward(program, self.forward(program)))

    def measure_memory(self, program: _Program) -> MemoryFigures:
        """The allocator's peak above the inputs, and what forward leaves for backward."""
        context = program.context
        if not context.is_cuda:
            # The caller's upstream gradient is made inside the measured call.
            peak, _ = allocator_peak_cpu(lambda: self._both(program))
            output: list[int] = []

            def forward() -> Live:
                live = self.forward(program)
                output.append(live[program.compiled.output].untyped_storage().nbytes())
                return live

            _, end = allocator_peak_cpu(forward)
            return MemoryFigures(peak, end - output[0], CPU_BASIS)
        import torch

        index = torch.device(context.device).index or 0
        # One untimed, unmeasured run first: library handles and their workspaces are
        # created lazily and stay; they belong to the baseline, not to the strategy.
        del_me = self._both(program)
        del del_me
        peak = allocator_peak(lambda: self._both(program), context)
        # Retained: the live requests (held_bytes), not memory_allocated, which also
        # counts the slack of cached blocks handed out whole (up to 1 MiB each).
        snapshot = torch.cuda.memory_snapshot
        base = held_bytes(snapshot(), index)  # type: ignore[no-untyped-call]
        probe = self.forward(program)
        context.fence()
        output_bytes = probe[program.compiled.output].untyped_storage().nbytes()
        retained = (held_bytes(snapshot(), index) - base  # type: ignore[no-untyped-call]
                    - allocated_bytes(output_bytes, True))
        del probe
        return MemoryFigures(int(peak), int(retained), CUDA_BASIS)


def held_bytes(snapshot: Sequence[Mapping[str, Any]], device: int) -> int:
    """Bytes the CUDA allocator holds for live tensors on ``device``, each request rounded.

    Each live block counts its request rounded up to 512 B (:func:`.allocated_bytes`),
    not the block's size: the caching allocator hands out a cached block whole when less
    than 1 MiB of it would be left over, and ``memory_allocated`` then counts that
    remainder too, which depends on what earlier runs left cached, not on the schedule.

    Args:
        snapshot: ``torch.cuda.memory_snapshot()``: segments, each with its blocks.
        device: The device's index.
    """
    return sum(
        allocated_bytes(block["requested_size"], True)
        for segment in snapshot if segment.get("device", device) == device
        for block in segment["blocks"] if block["state"] == "active_allocated"
    )
