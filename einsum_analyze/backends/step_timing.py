"""Per-step times of one strategy's run (``--profile-steps``), with the torch executor.

Each phase runs its compiled events with a mark after every event: on CUDA an event
recorded on the stream (``torch.cuda.Event``), on cpu ``time.perf_counter`` after the
device's fence. The marks are contiguous (each event's time runs from the previous mark
to its own), so the steps and the events between them (seeds, views, frees) add up to
the phase. Medians over ``repeats`` calls after ``warmup`` untimed ones.

On cpu the forward is timed as the measured forward is, in blocks of calls back to
back (:func:`_forward_block`): single calls timed apart left out what lies between two
calls (the last call's tensors freed) and, on a shared machine, the time the process
waits for a core, which a block's time holds (``attention3`` at 1/8 on the 2-core cpu:
0.11 ms a single call, 0.28 ms a call in a block).

On CUDA the device and the host are timed apart, and the two joined as a queue. The
device is held busy (``torch.cuda._sleep``) while the host queues a phase, for longer
than the host took to queue it in the warm-up: its marks then time each event's own
work with the queue full. Without the hold, the device waited for the host after the
fence that starts each phase, and whenever the host, recording a mark after every
event, fell behind short kernels (on an H200, 14% to 33% of ``attention3``'s measured
forward and backward fell into the steps that way). With it alone, the time the device
waits for the host in a real run was in no step: the steps added up to 81% and 86% of
the measured totals of ``attention3`` and ``tucker``. So a second run of the phase,
without device marks or hold, times when the host has queued each event
(``perf_counter`` after its call), and :func:`queued_intervals` replays the two: an
event starts on the device once it is queued and the one before it is done, and its
time runs from that one's end to its own. A wait for the host belongs to the event
waited for, and the events add up to the phase as the device and host ran it.
A mark is work on the device too (an event recorded between every two kernels), so the
held phase is also timed with two marks only, at its ends, and its marked intervals are
scaled to that total (:func:`scaled_to`) before they are joined with the host's pace.

Only the backward is joined with the host's pace. The measured backward is one fenced
call, as the joined phase is; the measured forward is a block of calls back to back,
in which the host queues the next calls while the device runs, so its steps are the
device's intervals with its queue full. On the H200 (docs/results/gpu_2026-12-02e),
``tn18-b65536-bond64``'s reverse forward took 1.437 ms held, against 1.451 ms a call
measured in blocks of 100; joined with the host's pace from an idle device it took
1.873 ms, as one fenced call does (1.778 ms). Joined, the forward steps had added up
to 17% to 56% more than the measured forward on the cases timed. A forward whose host
cannot keep up with its device (a chain of tiny steps) is under-counted this way.

torch is imported inside the functions: importing this module costs nothing.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..model.memory import Event
from ..model.schedule import STEP_OPERATIONS
from ..roofline.steps import StepTime
from .base import DeviceContext
from .torch_backend import hand_upstream, run_compiled
from .torch_kernels import CompiledSchedule, Live

__all__ = ["queued_intervals", "scaled_to", "time_steps"]


def _can_hold() -> bool:
    import torch

    return hasattr(torch.cuda, "_sleep")


class _Marks:
    """Contiguous time marks on one device: CUDA events, or perf_counter after a fence."""

    def __init__(self, context: DeviceContext, count: int) -> None:
        self.context = context
        self.cuda: list[Any] = []
        self.clock: list[float] = []
        if context.is_cuda:
            import torch

            self.cuda = [torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
                         for _ in range(count + 1)]
        self.position = 0

    def mark(self) -> None:
        if self.cuda:
            self.cuda[self.position].record()
        else:
            self.context.fence()
            self.clock.append(time.perf_counter())
        self.position += 1

    def seconds(self) -> list[float]:
        """Each interval's seconds, after the last mark (waits for the device)."""
        if self.cuda:
            self.context.fence()
            return [self.cuda[n].elapsed_time(self.cuda[n + 1]) / 1e3
                    for n in range(self.position - 1)]
        return [b - a for a, b in zip(self.clock, self.clock[1:], strict=False)]


def _phase(ops: Sequence[Any], live: Live, context: DeviceContext,
           hold: _Hold | None) -> tuple[list[float], float]:
    """The phase's intervals, and the seconds the host took to queue it."""
    marks = _Marks(context, len(ops))
    context.fence()
    if hold is not None:
        hold.busy()
    start = time.perf_counter()
    marks.mark()
    run_compiled(ops, live, on_step=marks.mark)
    queued = time.perf_counter() - start
    return marks.seconds(), queued


def _held_total(ops: Sequence[Any], live: Live, context: DeviceContext, hold: _Hold) -> float:
    """The phase's device seconds, the device held as for :func:`_phase`, two marks only."""
    import torch

    start, end = (torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
                  for _ in range(2))
    context.fence()
    hold.busy()
    start.record()
    run_compiled(ops, live)
    end.record()
    context.fence()
    return float(start.elapsed_time(end)) / 1e3


def scaled_to(intervals: Sequence[float], total: float) -> list[float]:
    """``intervals``, each less an equal share of the marks' cost, adding up to ``total``.

    Every mark costs the device alike, so the marked intervals' excess over the phase's
    unmarked ``total`` is taken from each in equal shares (none goes below zero), and what
    is left is scaled to ``total`` (where the marked run was the quicker, by noise, only
    that). Intervals that add up to nothing are returned as they are.

    Example:
        Marks between the kernels made three kernels of 30, 10 and 20 us read 32, 12 and
        22 us: ``scaled_to([32e-6, 12e-6, 22e-6], 60e-6)`` is about ``[30e-6, 10e-6, 20e-6]``.
    """
    measured = sum(intervals)
    if measured <= 0 or not intervals:
        return list(intervals)
    share = max(measured - total, 0.0) / len(intervals)
    left = [max(value - share, 0.0) for value in intervals]
    kept = sum(left)
    return [value * total / kept for value in left] if kept > 0 else left


def _queued(ops: Sequence[Any], live: Live, context: DeviceContext) -> list[float]:
    """Seconds from the phase's start (device idle) until the host queued each event."""
    clock = time.perf_counter
    marks: list[float] = []
    context.fence()
    start = clock()
    run_compiled(ops, live, on_step=lambda: marks.append(clock() - start))
    context.fence()
    return marks


def queued_intervals(queued_s: Sequence[float], busy_s: Sequence[float]) -> list[float]:
    """Each event's seconds in a phase where the host queues work for the device.

    Args:
        queued_s: Seconds from the phase's start (the device idle) until the host had
            queued each event, in order (non-decreasing).
        busy_s: The device's seconds for each event, its queue full.

    Returns:
        Each event's interval: from the end of the event before it (the phase's start,
        for the first) to its own end, where an event ends ``busy_s`` after both it is
        queued and the one before it is done. The intervals add up to the phase.

    Example:
        The host queues an event every 2 us; the device takes 1 us, then 5 us, then 1 us:
        ``queued_intervals([2e-6, 4e-6, 6e-6], [1e-6, 5e-6, 1e-6])`` is about
        ``[3e-6, 6e-6, 1e-6]`` (the first waits 2 us for the host, the second 1 us, the
        third none: the device is still busy when it is queued).
    """
    intervals: list[float] = []
    done = 0.0
    for queued, busy in zip(queued_s, busy_s, strict=True):
        end = max(done, queued) + busy
        intervals.append(end - done)
        done = end
    return intervals


class _Hold:
    """Keeps a CUDA device busy, so that the host queues a phase ahead of it."""

    def __init__(self) -> None:
        import torch

        # torch.cuda._sleep: a spin of so many cycles on the device (untyped)
        self.sleep: Callable[[int], None] = getattr(torch.cuda, "_sleep")  # noqa: B009
        start, end = (torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
                      for _ in range(2))
        self.sleep(1000)  # loaded before it is timed
        cycles = 2_000_000
        start.record()
        self.sleep(cycles)
        end.record()
        end.synchronize()
        self.cycles_per_s = cycles / max(start.elapsed_time(end) / 1e3, 1e-6)
        self.seconds = 0.0

    def need(self, queued_s: float) -> None:
        """Hold the device twice as long as the host took to queue a phase, unheld.

        Sized once, from a call the device was not held for: with the device held, a
        phase of more events than the device's queue takes makes the host wait for the
        hold, and sizing by that doubled the hold on every warm-up call
        (``tn18-b65536-bond64``'s ``independent`` on an H200: 0.6 s a phase, 85 s of the
        step-time test's 87).
        """
        if not self.seconds:
            self.seconds = 2 * queued_s + 50e-6

    def busy(self) -> None:
        if self.seconds:
            self.sleep(int(self.seconds * self.cycles_per_s))


def time_steps(
    program: Any,
    context: DeviceContext,
    events: Sequence[Event],
    *,
    repeats: int,
    warmup: int,
) -> tuple[tuple[StepTime, ...], float] | None:
    """Each computing step's median time, and the median time of the other events.

    Args:
        program: The torch executor's compiled program (``compiled`` and ``context``).
        context: Operands and upstream gradient on the device.
        events: The schedule the program was compiled from.
        repeats: Timed calls of forward and backward.
        warmup: Untimed calls first.

    Returns:
        None when the program is not one event per compiled call (another backend).
    """
    compiled = getattr(program, "compiled", None)
    if not isinstance(compiled, CompiledSchedule):
        return None
    positions = {phase: [n for n, e in enumerate(events) if e.phase == phase]
                 for phase in ("forward", "backward")}
    if (len(positions["forward"]) != len(compiled.forward)
            or len(positions["backward"]) != len(compiled.backward)):
        return None
    samples: list[list[float]] = []
    hold = _Hold() if context.is_cuda and _can_hold() else None
    block = 1  # forward calls per timed block on cpu, sized in the warm-up
    for call in range(max(warmup, 1) + repeats):
        live: Live = {f"in{k}": t for k, t in enumerate(context.operands)}
        forward, queued = _phase(compiled.forward, live, context, hold)
        if not context.is_cuda:
            if call < max(warmup, 1):
                block = _block_calls(sum(forward))
            else:
                forward = _forward_block(compiled.forward, context, block)
        backward: list[float] = []
        if compiled.backward:
            hand_upstream(live, context)  # held as the measured backward holds it
            backward, queued_backward = _phase(compiled.backward, live, context, hold)
            queued = max(queued, queued_backward)
        del live
        if hold is not None:
            forward, backward = _unmarked(compiled, context, hold, forward, backward)
            backward = _with_host(compiled, context, backward)
        if call < max(warmup, 1):
            if hold is not None:
                hold.need(queued)
        else:
            samples.append(forward + backward)
    order = positions["forward"] + positions["backward"]
    medians = [statistics.median(column) for column in zip(*samples, strict=True)]
    steps: list[StepTime] = []
    other: list[float] = []
    for position, seconds in zip(order, medians, strict=True):
        event = events[position]
        if event.kind == "alloc" and event.op in STEP_OPERATIONS:
            steps.append(StepTime(event=position, phase=event.phase, tensor=event.tensor,
                                  time_s=seconds))
        else:
            other.append(seconds)
    return tuple(steps), sum(other)


def _unmarked(compiled: CompiledSchedule, context: DeviceContext, hold: _Hold,
              forward: list[float], backward: list[float]) -> tuple[list[float], list[float]]:
    """The device's marked intervals of each phase, scaled to its held total unmarked."""
    live: Live = {f"in{k}": t for k, t in enumerate(context.operands)}
    forward = scaled_to(forward, _held_total(compiled.forward, live, context, hold))
    if compiled.backward:
        hand_upstream(live, context)
        backward = scaled_to(backward, _held_total(compiled.backward, live, context, hold))
    return forward, backward


def _with_host(compiled: CompiledSchedule, context: DeviceContext,
               backward: list[float]) -> list[float]:
    """The device's backward intervals joined with the host's pace (a second run).

    The forward is left as the device ran it with its queue full: the measured forward
    is a block of calls back to back, in which the host queues ahead of the device.
    """
    if not compiled.backward:
        return backward
    live: Live = {f"in{k}": t for k, t in enumerate(context.operands)}
    run_compiled(compiled.forward, live)
    hand_upstream(live, context)
    return queued_intervals(_queued(compiled.backward, live, context), backward)


def _block_calls(call_s: float, target_s: float = 0.02, most: int = 1000) -> int:
    """Calls of a block as the measured forward sizes it: tenfold until ``target_s``."""
    calls = 1
    while calls < most and calls * call_s < target_s:
        calls *= 10
    return min(calls, most)


def _forward_block(ops: Sequence[Any], context: DeviceContext, calls: int,
                   clock: Callable[[], float] = time.perf_counter) -> list[float]:
    """Each forward event's mean seconds over ``calls`` calls run back to back (cpu).

    The measured forward is such a block, so its figure holds what lies between the
    events of one call and the next (the previous call's tensors freed, the next one's
    live tensors made) and, on a shared machine, the time the process waits for a core.
    The marks run on across calls: what lies between two calls belongs to the next
    call's first event, the end of the last call to the first event too.
    """
    totals = [0.0] * len(ops)
    position = 0
    last = 0.0

    def mark() -> None:
        nonlocal position, last
        now = clock()
        totals[position] += now - last
        last = now
        position += 1

    context.fence()
    last = clock()
    for _ in range(calls):
        position = 0
        live: Live = {f"in{k}": t for k, t in enumerate(context.operands)}
        run_compiled(ops, live, on_step=mark)
    del live
    context.fence()
    if totals:
        totals[0] += clock() - last
    return [total / calls for total in totals]
