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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..model.planning import Plan

__all__ = ["ScheduleSlices"]


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

    def predicted_peak_bytes(self, slices: Sequence[int], *, is_cuda: bool) -> int | None:
        """The replay of the subset's schedule, inputs included, on the device's basis."""
        from ..backends.base import predicted_peak_bytes

        lowered = self._lowered(slices, self.grad, compile_=False)
        eq = self.plan.equation
        return predicted_peak_bytes(
            lowered.events,
            input_bytes=[math.prod(shape) * self.itemsize for shape in eq.shapes],
            output_elements=self.plan.steps[-1].output_elements if self.plan.steps else 1,
            itemsize=self.itemsize, is_cuda=is_cuda)

    def run(self, slices: Sequence[int], operands: Sequence[Any], upstream: Any | None,
            grad: Sequence[int]) -> tuple[Any, Mapping[int, Any]]:
        """Forward and, with ``upstream``, backward of ``slices`` (full-size buffers)."""
        from ..backends.torch_backend import run_compiled

        wanted = tuple(grad) if upstream is not None else ()
        lowered = self._lowered(slices, wanted, compile_=True)
        live = {f"in{k}": t for k, t in enumerate(operands)}
        if wanted and upstream is not None:
            live["upstream"] = upstream.clone()  # the seed takes it over
        run_compiled(lowered.compiled.forward + lowered.compiled.backward, live)
        output = live[lowered.compiled.final_output]
        return output, {k: live[lowered.gradients.get(k, f"d{k}")] for k in wanted}
