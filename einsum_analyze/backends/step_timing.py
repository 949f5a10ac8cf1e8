"""Per-step times of one strategy's run (``--profile-steps``), with the torch executor.

Each phase runs its compiled events with a mark after every event: on CUDA an event
recorded on the stream (``torch.cuda.Event``), on cpu ``time.perf_counter`` after the
device's fence. The marks are contiguous (each event's time runs from the previous mark
to its own), so the steps and the events between them (seeds, views, frees) add up to
the phase. Medians over ``repeats`` calls after ``warmup`` untimed ones.

On CUDA the device is held busy (``torch.cuda._sleep``) while the host queues a phase,
for longer than the host took to queue it in the warm-up: the marks then time the
device's work with its queue full, as the measured forward's back-to-back calls do.
Without it, the device waits for the host after the fence that starts each phase, and
whenever the host, recording a mark after every event, falls behind short kernels; that
waiting fell into the steps' times (on an H200, 14% to 33% of ``attention3``'s measured
forward and backward).

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
from .torch_backend import run_compiled
from .torch_kernels import CompiledSchedule, Live

__all__ = ["time_steps"]


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
        """Hold the device at least twice as long as the host took to queue a phase."""
        self.seconds = max(self.seconds, 2 * queued_s + 50e-6)

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
    for call in range(max(warmup, 1) + repeats):
        live: Live = {f"in{k}": t for k, t in enumerate(context.operands)}
        forward, queued = _phase(compiled.forward, live, context, hold)
        backward: list[float] = []
        if compiled.backward:
            live["upstream"] = context.upstream.clone()
            backward, queued_backward = _phase(compiled.backward, live, context, hold)
            queued = max(queued, queued_backward)
        del live
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
