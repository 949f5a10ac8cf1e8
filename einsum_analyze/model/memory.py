"""Memory as a replay of a schedule of allocate and free events (docs/method.md section 3).

A schedule lists, in execution order, every tensor the run creates and when it dies.
The caller's operands are live throughout and are not in the schedule; the replay adds
them as a constant. Figures are in elements inside the schedule and in bytes in the
:class:`MemoryProfile`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .planning import Plan, size_of
from .schedule import Event

__all__ = [
    "Event",
    "MemoryProfile",
    "forward_schedule",
    "input_elements",
    "simulate_memory",
    "tensor_name",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryProfile:
    """The result of replaying a schedule.

    Attributes:
        itemsize: Bytes per element.
        input_bytes: The caller's operands, live throughout.
        peak_bytes: Largest live total, inputs included.
        peak_event: Index of the event at which the peak was first reached (-1: inputs only).
        forward_peak_bytes: Largest live total during the forward events, inputs included.
        retained_bytes: Bytes live at the end of forward beyond the inputs and the output
            (kept for backward).
        final_bytes: Bytes live after the last event, inputs included, once the caller
            has let go of its upstream gradient (unless a gradient is a view of it).
        live_bytes: Live total after every event, inputs included.
        high_bytes: Live total at the high point of every event (its output and its
            workspace allocated, nothing yet freed), inputs included.
    """

    itemsize: int
    input_bytes: int
    peak_bytes: int
    peak_event: int
    forward_peak_bytes: int
    retained_bytes: int
    final_bytes: int
    live_bytes: tuple[int, ...]
    high_bytes: tuple[int, ...]

    @property
    def peak_bytes_without_inputs(self) -> int:
        """The peak above what the caller's operands already take."""
        return self.peak_bytes - self.input_bytes

    def __repr__(self) -> str:
        return f"MemoryProfile(peak_bytes={self.peak_bytes}, retained_bytes={self.retained_bytes})"


def input_elements(plan: Plan) -> int:
    """Total elements of the caller's operands."""
    size_dict = plan.equation.size_dict
    return sum(size_of(term, size_dict) for term in plan.equation.terms)


def forward_schedule(plan: Plan, retain: Iterable[int] = ()) -> list[Event]:
    """The forward pass as events: each step allocates its result; dead ones are freed.

    Args:
        plan: The forward plan.
        retain: Single-use ids of intermediates to keep alive after forward (for
            backward); all others are freed by the step that consumes them.

    Returns:
        The events in order. The final output is never freed (the caller receives it).
    """
    kept = set(retain)
    num_ops = plan.equation.num_operands
    sizes = {step.output: step.output_elements for step in plan.steps}
    events: list[Event] = []
    for step in plan.steps:
        events.append(
            Event(
                kind="alloc",
                tensor=tensor_name(step.output, num_ops),
                elements=step.output_elements,
                phase="forward",
                op="contract",
                inputs=tuple(tensor_name(i, num_ops) for i in step.inputs),
                equation=step.equation,
                flops=step.flops,
            )
        )
        for tensor in step.inputs:
            if tensor >= num_ops and tensor not in kept:
                events.append(
                    Event(kind="free", tensor=tensor_name(tensor, num_ops),
                          elements=sizes[tensor], phase="forward")
                )
    return events


def tensor_name(ssa_id: int, num_operands: int) -> str:
    """Schedule name of a forward tensor: ``"in3"`` for operand 3, ``"x20"`` for id 20."""
    return f"in{ssa_id}" if ssa_id < num_operands else f"x{ssa_id}"


def simulate_memory(
    events: Sequence[Event],
    *,
    input_elements: int,
    output_elements: int,
    itemsize: int,
    granularity: int = 1,
    upstream_copy: bool = False,
    cpu: bool = True,
) -> MemoryProfile:
    """Replay ``events`` and report live bytes.

    The seed (the first backward tensor, ``op="seed"``) is the caller's upstream
    gradient: made when backward starts and held by the caller (``autograd.grad``'s
    argument, or the autograd engine calling a node's backward) until backward ends.
    The schedule reads it in place, so freeing the seed, or a view that took over its
    storage, releases nothing. With ``upstream_copy`` (complex dtypes: backward
    conjugates its seed in place) the seed is a copy of the caller's gradient: both are
    held, and the copy dies when the schedule frees it.

    Args:
        events: The schedule.
        input_elements: Elements of the caller's operands (live throughout).
        output_elements: Elements of the forward output, to separate it from retained bytes.
        itemsize: Bytes per element.
        granularity: Round every allocation up to a multiple of this many bytes, as a
            device allocator does (CUDA's rounds to 512); 1 counts exact bytes.
        upstream_copy: The seed is a copy of the caller's upstream gradient (complex
            dtypes), not the caller's tensor itself.
        cpu: The cpu's kernels: a 2-byte dtype's sums count their float32 temporaries
            (:attr:`Kernel.upcast`); False for a CUDA device, whose sums make none.

    Returns:
        The :class:`MemoryProfile`.

    Raises:
        ValueError: A tensor is freed without being live, or allocated twice.

    Example:
        >>> ev = [Event(kind="alloc", tensor="x2", elements=6, phase="forward")]
        >>> simulate_memory(ev, input_elements=10, output_elements=6, itemsize=4).peak_bytes
        64
    """
    def nbytes(elements: int) -> int:
        raw = elements * itemsize
        return -(-raw // granularity) * granularity if granularity > 1 else raw

    live: dict[str, int] = {}
    caller: set[str] = set()  # tensors whose storage is the caller's upstream gradient
    let_go = 0  # the caller's upstream gradient, no longer read: released after backward
    inputs = input_elements * itemsize
    total = inputs
    peak, peak_event = total, -1
    forward_peak = total
    forward_end_total = total
    after: list[int] = []
    high: list[int] = []
    upcasts = cpu and itemsize == 2
    for number, event in enumerate(events):
        if event.kind == "alloc":
            base = total
            if event.tensor in live:
                raise ValueError(f"tensor {event.tensor} allocated twice")
            size = nbytes(event.elements)
            live[event.tensor] = size
            total += size
            if event.op == "seed":
                if upstream_copy:
                    total += size  # the caller's gradient, beside the copy the seed is
                else:
                    caller.add(event.tensor)
            for name, _ in event.consumes:
                # A view takes over its input's storage: nothing new is held.
                freed = live.pop(name, None)
                if freed is None:
                    raise ValueError(f"tensor {name} consumed but not live")
                total -= freed
                if name in caller:
                    caller.discard(name)
                    caller.add(event.tensor)
            top = total
            if event.workspace:  # most steps have none: no generator for them
                top += sum(map(nbytes, event.workspace))
            if upcasts and event.kernel is not None and event.kernel.upcast:
                top = max(top, *(base + made * itemsize + 4 * extra
                                 for made, extra in event.kernel.upcast))
        else:
            freed = live.pop(event.tensor, None)
            if freed is None:
                raise ValueError(f"tensor {event.tensor} freed but not live")
            if event.tensor in caller:
                caller.discard(event.tensor)  # the caller still holds the storage
                let_go += freed
            else:
                total -= freed
            top = total
        after.append(total)
        high.append(top)
        if top > peak:
            peak, peak_event = top, number
        if event.phase == "forward":
            forward_peak = max(forward_peak, top)
            forward_end_total = total
    return MemoryProfile(
        itemsize=itemsize,
        input_bytes=inputs,
        peak_bytes=peak,
        peak_event=peak_event,
        forward_peak_bytes=forward_peak,
        retained_bytes=forward_end_total - inputs - nbytes(output_elements),
        final_bytes=total - let_go,
        live_bytes=tuple(after),
        high_bytes=tuple(high),
    )
