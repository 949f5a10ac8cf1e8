"""The sliced strategy's schedule as a :class:`~.contract.SliceRunner`.

:func:`einsum_analyze.slicing.sliced_schedule` schedules any subset of the slices into
full-size output and gradient buffers. This runner lowers that schedule and runs it as
:func:`einsum_analyze.slicing.run_slices` does (the torch executor's compiled events),
with one difference: the lowered and compiled schedule of each subset is built once per
process and cached, so that a timed step contracts and never plans. A device's
predicted peak is the replay (:func:`~einsum_analyze.backends.base.predicted_peak_bytes`)
of the very events it runs.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..model.planning import Plan
from .comm import OUTPUT, CommPlan, plan_communication

__all__ = ["ScheduleSlices"]

_IN_SLICE = re.compile(r"@(\d+)$")
_ADDED_BY = re.compile(r"^(?:y|acc\d+)\.(\d+)$")
_BUFFER = re.compile(r"^(?:y|acc(\d+)|d(\d+))(?:\.\d+)?$")


def _slice_of(event: Any) -> int | None:
    """The slice an event belongs to, or None.

    The ``@k`` of a tensor it makes or reads, else the ``.k`` of a buffer a slice's
    addition made (``y.3``, ``acc0.3``).
    """
    for name in (event.tensor, *event.inputs):
        match = _IN_SLICE.search(name)
        if match:
            return int(match.group(1))
    match = _ADDED_BY.match(event.tensor)
    return int(match.group(1)) if match else None


def segment_ends(events: Sequence[Any], ids: Sequence[int]) -> tuple[int, ...]:
    """The index of the last event of each slice of ``ids``, in their order.

    The events before the first slice (the buffers, the seed) go with it, those after
    the last (freeing the seed) with the last.

    Raises:
        AssertionError: The slices' events are not in the order of ``ids``.
    """
    position = {k: p for p, k in enumerate(ids)}
    ends = [-1] * len(ids)
    current = 0
    for number, event in enumerate(events):
        k = _slice_of(event)
        if k is not None:
            assert position[k] >= current, f"slice {k}'s events are out of order"
            current = position[k]
            ends[current] = number
    if ids:
        ends[-1] = len(events) - 1
    return tuple(ends)


def _buffers(live: Mapping[str, Any]) -> dict[int, Any]:
    """The full-size output and gradient buffers among the live tensors, by key."""
    found: dict[int, Any] = {}
    for name, tensor in live.items():
        match = _BUFFER.match(name)
        if match:
            number = match.group(1) or match.group(2)
            found[OUTPUT if number is None else int(number)] = tensor
    return found


@dataclass(frozen=True, slots=True)
class _Lowered:
    events: tuple[Any, ...]
    sizes: dict[str, int]
    output: str
    gradients: Mapping[int, str]
    compiled: Any


@dataclass(frozen=True, kw_only=True)
class ScheduleSlices:
    """A sliced plan's slices, run by our executor (picklable; see the module).

    Attributes:
        plan: The unsliced forward plan (each slice's path).
        slices: The :class:`einsum_analyze.slicing.plan.SlicePlan`.
        grad: Operands that need a gradient.
        itemsize: Bytes per element.
        strategy: The per-slice strategy, ``reverse`` or ``checkpoint``.
        options: Its options.
    """

    plan: Plan
    slices: Any
    grad: tuple[int, ...]
    itemsize: int
    strategy: str = "reverse"
    options: Mapping[str, Any] = field(default_factory=dict)
    _cache: dict[Any, Any] = field(default_factory=dict, repr=False, compare=False)

    def __getstate__(self) -> dict[str, Any]:
        state = {name: getattr(self, name) for name in
                 ("plan", "slices", "grad", "itemsize", "strategy", "options")}
        state["options"] = dict(state["options"])
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            object.__setattr__(self, name, value)
        object.__setattr__(self, "_cache", {})

    @property
    def slice_count(self) -> int:
        """How many slices the plan has."""
        return int(self.slices.count)

    def _schedule(self, ids: Sequence[int], grad: Sequence[int]) -> Any:
        key = ("schedule", tuple(ids), tuple(grad))
        if key not in self._cache:
            from ..slicing import sliced_schedule

            self._cache[key] = sliced_schedule(
                self.plan, self.slices, grad, itemsize=self.itemsize,
                strategy=self.strategy, options=self.options or None, slice_ids=ids)
        return self._cache[key]

    def _lowered(self, ids: Sequence[int], grad: Sequence[int], compile_: bool) -> _Lowered:
        key = ("lowered", tuple(ids), tuple(grad), compile_)
        if key not in self._cache:
            from ..model.lowering import lower_events

            schedule = self._schedule(ids, grad)
            eq = self.plan.equation
            sizes = schedule.sizes(eq.size_dict)
            events = tuple(lower_events(schedule.events, eq.terms, sizes))
            compiled = None
            if compile_:
                from ..backends.torch_kernels import compile_schedule

                compiled = compile_schedule(events, sizes)
            self._cache[key] = _Lowered(events, sizes, schedule.output,
                                        dict(schedule.gradients), compiled)
        lowered: _Lowered = self._cache[key]
        return lowered

    def full_schedule(self) -> Any:
        """The schedule of every slice (the ``sliced`` strategy's own)."""
        return self._schedule(range(self.slice_count), self.grad)

    def slice_costs(self) -> Sequence[float]:
        """Forward and backward FLOPs of each slice."""
        flops = self.full_schedule().slice_flops
        return [float(sum(flops[k])) for k in range(self.slice_count)]

    def communication_plan(self, assignment: Sequence[Sequence[int]], communication: str,
                           *, output: bool = True, gradients: bool = True) -> CommPlan:
        """The collectives that give every rank the whole output and gradients.

        Args:
            assignment: Each rank's slices.
            communication: ``all-reduce``, ``gather`` or ``overlap`` (:mod:`.comm`).
            output: Exchange the output buffer.
            gradients: Exchange the gradient buffers.
        """
        eq = self.plan.equation
        buffers = {OUTPUT: eq.output} if output else {}
        if gradients:
            buffers.update({i: eq.terms[i] for i in self.grad})
        return plan_communication(buffers=buffers, sizes=eq.size_dict, slices=self.slices,
                                  assignment=assignment, itemsize=self.itemsize,
                                  communication=communication)

    def predicted_peak_bytes(self, slices: Sequence[int], *, is_cuda: bool,
                             exchange: CommPlan | None = None) -> int | None:
        """The replay of the subset's schedule, inputs included, on the device's basis.

        With ``exchange``, the step's packs too: those of round ``j`` live from the end
        of the ``j``-th slice (overlap), the rest from the end of the schedule, all of
        them until the exchange ends; the end of the schedule holds the output and the
        gradients (the seed let go).
        """
        from ..backends.base import CUDA_GRANULARITY, allocated_bytes
        from ..model.memory import simulate_memory

        lowered = self._lowered(slices, self.grad, compile_=False)
        eq = self.plan.equation
        inputs = sum(allocated_bytes(math.prod(shape) * self.itemsize, is_cuda)
                     for shape in eq.shapes)
        replay = simulate_memory(
            lowered.events, input_elements=0,
            output_elements=self.plan.steps[-1].output_elements if self.plan.steps else 1,
            itemsize=self.itemsize, granularity=CUDA_GRANULARITY if is_cuda else 1,
            cpu=not is_cuda)
        if exchange is None:
            return replay.peak_bytes + inputs
        packs = [sum(allocated_bytes(e * self.itemsize, is_cuda) for e in per_round)
                 for per_round in exchange.packs(len(slices))]
        ends = segment_ends(lowered.events, slices)
        peak, extra, boundary = replay.peak_bytes, 0, 0
        for number, high in enumerate(replay.high_bytes):
            peak = max(peak, high + extra)
            while boundary < len(ends) - 1 and ends[boundary] == number:
                extra += packs[boundary]
                boundary += 1
        return max(peak, replay.final_bytes + sum(packs)) + inputs

    def run(self, slices: Sequence[int], operands: Sequence[Any], upstream: Any | None,
            grad: Sequence[int], *,
            on_slice: Callable[[int, Mapping[int, Any]], None] | None = None,
            ) -> tuple[Any, Mapping[int, Any]]:
        """Forward and, with ``upstream``, backward of ``slices`` (full-size buffers).

        Args:
            slices: The slices to run, in order.
            operands: The operands, on one device.
            upstream: The upstream gradient; None runs forward only.
            grad: The operands that need a gradient.
            on_slice: Called after each slice with its position and the buffers (the
                output, key -1, and the gradients, by operand), which later slices
                keep adding to (:class:`.collectives.Exchange` sends the final parts).
        """
        from ..backends.torch_backend import run_compiled

        wanted = tuple(grad) if upstream is not None else ()
        lowered = self._lowered(slices, wanted, compile_=True)
        live = {f"in{k}": t for k, t in enumerate(operands)}
        if wanted and upstream is not None:
            live["upstream"] = upstream.clone()  # the seed takes it over
        ops = lowered.compiled.forward + lowered.compiled.backward
        if on_slice is None or not slices:
            run_compiled(ops, live)
        else:
            assert len(ops) == len(lowered.events), "one compiled call per event"
            start = 0
            for position, end in enumerate(segment_ends(lowered.events, slices)):
                run_compiled(ops[start:end + 1], live)
                start = end + 1
                on_slice(position, _buffers(live))
        output = live[lowered.compiled.final_output]
        return output, {k: live[lowered.gradients.get(k, f"d{k}")] for k in wanted}
