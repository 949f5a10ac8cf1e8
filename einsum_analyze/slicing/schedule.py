"""A sliced training step as one schedule of events (docs/slicing.md).

:func:`sliced_schedule` strings the schedules of the slices together. Each slice runs the
per-slice strategy (``reverse`` or ``checkpoint``) on the slice's own equation, with the
same path as the unsliced plan; its tensors carry the suffix ``@k``. Around them:

- before anything: the full-size output buffer ``y`` (zeros) in the forward phase, and,
  when a gradient is wanted, the upstream gradient ``gy`` (the seed) and a zero-filled
  full-size gradient buffer per differentiated operand, in the backward phase;
- an operand holding a sliced index is read through its part (``"slice"``, a view, when
  the part is contiguous in memory; ``"slice_copy"`` otherwise: counted, see
  :attr:`SlicedSchedule.copies`), made just before its first use and freed after its last;
- the slice's output is added into its part of ``y`` (``"accumulate"``) as soon as the
  slice's forward is done, then freed; the slice's backward starts from its part of
  ``gy`` (a view or a copy, like an operand's);
- each gradient of the slice is added into its part of the operand's buffer as soon as
  it is made, then freed. The last addition names the buffer ``d{i}``.

With a gradient the step is fused by default: every slice's forward and backward run in
the backward call (its forward events are marked ``recompute``, read as the forward
reads them); the forward call only makes the zero output buffer. Unfused (``fused=False``,
for autograd), the forward call makes the output slice by slice keeping nothing, and the
backward call runs each slice's forward again (but for its output) then its backward.
Without a gradient, everything is forward. Every slice ends where it started (the
buffers and ``gy`` only), so the peak of each pass is the largest peak of one slice
above that base: slices of the same lengths have the same peak.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import PlanningError
from ..model.memory import forward_schedule, tensor_name
from ..model.planning import Plan, size_of
from ..model.schedule import Event, Phase
from ..strategies.common import ScheduleBuilder, StrategyInput
from ..strategies.registry import get_strategy
from .plan import SlicePlan, chunk_labels, slice_equation

__all__ = ["PER_SLICE_STRATEGIES", "SliceShape", "SlicedSchedule", "part_is_contiguous",
           "sliced_schedule"]

PER_SLICE_STRATEGIES = ("reverse", "checkpoint")
"""Strategies a slice may run: reverse mode through the tree, kept or recomputed (a
schedule that names each slice's tensors as :mod:`einsum_analyze.model.memory` does)."""

_GRADIENT = re.compile(r"d(\d+)")

Mode = Literal["fused", "forward", "backward"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SliceShape:
    """The schedule of the slices of one set of lengths.

    Attributes:
        lengths: Length of each sliced index in these slices.
        plan: The slice's plan (the unsliced path on the slice's equation).
        builder: The per-slice strategy's schedule, before lowering.
        rename: Chunk label of each sliced label.
        slices: The slices of these lengths among those scheduled.
    """

    lengths: tuple[int, ...]
    plan: Plan
    builder: ScheduleBuilder
    rename: Mapping[str, str]
    slices: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class SlicedSchedule:
    """The events of a sliced step and what the report says of them.

    Attributes:
        events: The schedule (not lowered: :func:`~einsum_analyze.model.lowering.lower_events`
            with :attr:`sizes`).
        labels: Size of each chunk label.
        forward_flops: FLOPs of the slices' forward contractions and of the output's
            additions (the rest is backward).
        shapes: One :class:`SliceShape` per set of lengths.
        copies: Contiguous copies of parts (operands and upstream gradient) per step.
        copy_elements: Their elements, summed over the step.
        output: Name of the full output after the last event.
        gradients: Name of each differentiated operand's full gradient (``d{i}``).
        slice_ids: The slices scheduled, in order.
        slice_flops: Forward and backward FLOPs of each slice scheduled (its additions
            into the buffers included).
        slice_events: Events of each slice scheduled (its parts and additions included);
            slices of the same lengths have as many. The rest are the buffers'.
    """

    events: tuple[Event, ...]
    labels: Mapping[str, int]
    forward_flops: int
    shapes: tuple[SliceShape, ...]
    copies: int
    copy_elements: int
    output: str
    gradients: Mapping[int, str]
    slice_ids: tuple[int, ...]
    slice_flops: Mapping[int, tuple[int, int]]
    slice_events: Mapping[int, int]

    def sizes(self, size_dict: Mapping[str, int]) -> dict[str, int]:
        """Every label's size: the equation's and the chunk labels'."""
        return {**size_dict, **self.labels}


def part_is_contiguous(term: str, sizes: Mapping[str, int], lengths: Mapping[str, int]) -> bool:
    """Whether the part of a contiguous tensor ``term`` is itself contiguous.

    The part takes ``lengths[label]`` of each sliced label (at any offset); dimensions of
    length 1 do not count, as torch's contiguity does not.

    Example:
        >>> part_is_contiguous("ab", {"a": 4, "b": 3}, {"a": 2})
        True
        >>> part_is_contiguous("ab", {"a": 4, "b": 3}, {"b": 2})
        False
    """
    expected = 1
    stride = 1
    for char in reversed(term):
        length = lengths.get(char, sizes[char])
        if length != 1:
            if stride != expected:
                return False
            expected *= length
        stride *= sizes[char]
    return True


def _check_strategy(name: str) -> None:
    if name not in PER_SLICE_STRATEGIES:
        raise PlanningError(
            f"a slice cannot run the {name!r} strategy; choose one of: "
            f"{', '.join(PER_SLICE_STRATEGIES)}"
        )


def _slice_builder(
    plan: Plan, strategy: str, grad: frozenset[int], itemsize: int,
    options: Mapping[str, Any] | None,
) -> ScheduleBuilder:
    spec = get_strategy(strategy)
    chosen = dict(spec.options)
    for key, value in (options or {}).items():
        if key not in spec.options:
            valid = ", ".join(spec.options) or "none"
            raise PlanningError(f"strategy {strategy!r} has no option {key!r}; its options: "
                                f"{valid}")
        chosen[key] = value
    return spec.build(StrategyInput(plan=plan, grad=grad, itemsize=itemsize, options=chosen))


def slice_shapes(
    plan: Plan,
    slices: SlicePlan,
    grad: Iterable[int],
    *,
    itemsize: int,
    strategy: str = "reverse",
    options: Mapping[str, Any] | None = None,
    slice_ids: Sequence[int] | None = None,
) -> tuple[tuple[SliceShape, ...], dict[tuple[str, int], str]]:
    """The per-slice schedule of every set of lengths among ``slice_ids``, and the labels."""
    _check_strategy(strategy)
    wanted = frozenset(grad)
    eq = plan.equation
    labels = chunk_labels(eq, slices)
    ids = tuple(range(slices.count)) if slice_ids is None else tuple(slice_ids)
    groups: dict[tuple[int, ...], list[int]] = {}
    for k in ids:
        groups.setdefault(slices.lengths(k), []).append(k)
    shapes: list[SliceShape] = []
    for lengths, members in groups.items():
        slice_eq, rename = slice_equation(eq, slices, lengths, labels)
        slice_plan = Plan.from_path(slice_eq, plan.path, optimizer=plan.optimizer)
        shapes.append(SliceShape(
            lengths=lengths, plan=slice_plan,
            builder=_slice_builder(slice_plan, strategy, wanted, itemsize, options),
            rename=rename, slices=tuple(members),
        ))
    return tuple(shapes), labels


def sliced_schedule(
    plan: Plan,
    slices: SlicePlan,
    grad: Iterable[int],
    *,
    itemsize: int,
    strategy: str = "reverse",
    options: Mapping[str, Any] | None = None,
    slice_ids: Sequence[int] | None = None,
    fused: bool = True,
) -> SlicedSchedule:
    """The sliced step's events (see the module).

    Args:
        plan: The unsliced forward plan (its path is each slice's path).
        slices: What to slice.
        grad: Operands that need a gradient.
        itemsize: Bytes per element (for a per-slice strategy's budget).
        strategy: The per-slice strategy, ``reverse`` or ``checkpoint``.
        options: The per-slice strategy's options.
        slice_ids: The slices to run (None: all, in order). The full-size output and
            gradients then hold the sum over these slices only: summed over any
            partition of the slices, they give the whole step's.
        fused: Run each slice's forward and backward together in the backward call (the
            upstream gradient known before the output is, as our runs give it). False:
            the forward call makes the whole output slice by slice, keeping nothing, and
            the backward call runs each slice's forward again (but for its output) before
            its backward, as autograd needs (a drop-in): one more forward in FLOPs.

    Raises:
        PlanningError: A per-slice strategy that a slice cannot run, an unknown option,
            or a slice number out of range.
    """
    ids = tuple(range(slices.count)) if slice_ids is None else tuple(slice_ids)
    for k in ids:
        if not 0 <= k < slices.count:
            raise PlanningError(f"slice {k} does not exist: the plan has {slices.count} slices")
    if len(set(ids)) != len(ids):
        raise PlanningError("a slice is named twice")
    wanted = frozenset(grad)
    shapes, labels = slice_shapes(plan, slices, wanted, itemsize=itemsize, strategy=strategy,
                                  options=options, slice_ids=ids)
    by_lengths = {shape.lengths: shape for shape in shapes}
    stitch = _Stitch(plan, slices, wanted)
    modes: tuple[Mode, ...] = (("forward",) if not wanted else ("fused",) if fused
                               else ("forward", "backward"))
    for mode in modes:
        if mode != "forward":
            stitch.begin_backward()
        for k in ids:
            stitch.add_slice(k, by_lengths[slices.lengths(k)], mode)
    stitch.finish()
    sizes = {labels[key]: key[1] for key in labels}
    return SlicedSchedule(
        events=tuple(stitch.events), labels=sizes, forward_flops=stitch.forward_flops,
        shapes=shapes, copies=stitch.copies, copy_elements=stitch.copy_elements,
        output=stitch.y, gradients=dict(stitch.acc), slice_ids=ids,
        slice_flops=stitch.slice_flops, slice_events=stitch.slice_events,
    )


class _Stitch:
    """Strings the slices' events together (see the module)."""

    def __init__(self, plan: Plan, slices: SlicePlan, grad: frozenset[int]) -> None:
        eq = plan.equation
        self.eq = eq
        self.plan = plan
        self.slices = slices
        self.grad = grad
        self.events: list[Event] = []
        self.forward_flops = 0
        self.copies = 0
        self.copy_elements = 0
        self.slice_flops: dict[int, tuple[int, int]] = {}
        self.slice_events: dict[int, int] = {}
        self.sliced = set(slices.indices)
        out = eq.output
        self.out_elements = size_of(out, eq.size_dict)
        self.y = "y"
        self.events.append(Event("alloc", "y", self.out_elements, "forward", op="zeros",
                                 equation=f"->{out}"))
        self.acc: dict[int, str] = {}

    def begin_backward(self) -> None:
        """The upstream gradient and the zero gradient buffers."""
        eq = self.eq
        self.events.append(Event("alloc", "gy", self.out_elements, "backward", op="seed",
                                 equation=f"->{eq.output}"))
        for i in sorted(self.grad):
            term = eq.terms[i]
            self.acc[i] = f"acc{i}"
            self.events.append(Event("alloc", f"acc{i}", size_of(term, eq.size_dict),
                                     "backward", op="zeros", equation=f"->{term}"))

    def _part(self, source: str, term: str, target: str, shape: SliceShape, k: int,
              phase: Phase) -> int:
        """Make the part of ``source`` (labels ``term``) that slice ``k`` reads."""
        eq = self.eq
        ranges = tuple(r for r in self.slices.ranges(k) if r[0] in term)
        lengths = {label: stop - start for label, start, stop in ranges}
        part_term = "".join(shape.rename.get(c, c) for c in term)
        elements = math.prod(lengths.get(c, eq.size_dict[c]) for c in term)
        copy = not part_is_contiguous(term, eq.size_dict, lengths)
        if copy:
            self.copies += 1
            self.copy_elements += elements
        self.events.append(Event(
            "alloc", target, elements if copy else 0, phase,
            op="slice_copy" if copy else "slice", inputs=(source,),
            equation=f"{term}->{part_term}", ranges=ranges,
        ))
        return elements if copy else 0

    def _accumulate(self, buffer: str, new: str, term: str, part: str, part_elements: int,
                    shape: SliceShape, k: int, phase: Phase) -> None:
        eq = self.eq
        ranges = tuple(r for r in self.slices.ranges(k) if r[0] in term)
        part_term = "".join(shape.rename.get(c, c) for c in term)
        full = size_of(term, eq.size_dict)
        lengths = {label: stop - start for label, start, stop in ranges}
        summed = not self.sliced <= set(term)
        flops = math.prod(lengths.get(c, eq.size_dict[c]) for c in term) if summed else 0
        self.events.append(Event(
            "alloc", new, full, phase,
            op="accumulate", inputs=(buffer, part), equation=f"{term},{part_term}->{term}",
            consumes=((buffer, full),), ranges=ranges, flops=flops,
        ))
        if phase == "forward" or buffer == self.y:
            self.forward_flops += flops
        self.events.append(Event("free", part, part_elements, phase))

    def add_slice(self, k: int, shape: SliceShape, mode: Mode) -> None:
        """Slice ``k``'s events, with the parts it reads and the additions it makes.

        ``mode``: ``"fused"`` (forward then backward, in the backward call),
        ``"forward"`` (forward only, keeping nothing, in the forward call) or
        ``"backward"`` (forward again, but for the output, then backward).
        """
        start = len(self.events)
        forward_before = self.forward_flops
        self._add_slice(k, shape, mode)
        total = sum(e.flops for e in self.events[start:])
        forward = self.forward_flops - forward_before
        before = self.slice_flops.get(k, (0, 0))
        self.slice_flops[k] = (before[0] + forward, before[1] + total - forward)
        self.slice_events[k] = self.slice_events.get(k, 0) + len(self.events) - start

    def _add_slice(self, k: int, shape: SliceShape, mode: Mode) -> None:
        eq = self.eq
        num_ops = eq.num_operands
        self.mode = mode
        fwd_phase: Phase = "forward" if mode == "forward" else "backward"
        sliced_ops = {i for i, term in enumerate(eq.terms) if self.sliced & set(term)}
        final = tensor_name(self.plan.steps[-1].output, num_ops)
        if mode == "forward":
            source: Sequence[Event] = forward_schedule(shape.plan)
        elif mode == "backward":
            source = [e for e in shape.builder.events
                      if not (e.kind == "alloc" and e.phase == "forward" and e.tensor == final)]
        else:
            source = shape.builder.events

        def rename(name: str) -> str:
            if name.startswith("in") and name[2:].isdigit() and int(name[2:]) not in sliced_ops:
                return name
            return f"{name}@{k}"

        parts = {f"in{i}@{k}": i for i in sliced_ops}
        first: dict[str, int] = {}
        lastuse: dict[str, int] = {}
        for position, event in enumerate(source):
            for name in event.inputs:
                renamed = rename(name)
                if renamed in parts:
                    first.setdefault(renamed, position)
                    lastuse[renamed] = position
        held: dict[str, int] = {}  # elements each slice tensor holds (0: a view)
        for position, event in enumerate(source):
            for name, at in first.items():
                if at == position:
                    held[name] = self._part(f"in{parts[name]}", eq.terms[parts[name]], name,
                                            shape, k, fwd_phase if event.phase == "forward"
                                            else "backward")
            if event.op == "seed":
                if mode == "fused":
                    self._output(k, shape, final, held, "backward")
                name = rename(event.tensor)
                held[name] = self._part("gy", eq.output, name, shape, k, "backward")
            elif event.kind == "free":
                name = rename(event.tensor)
                phase: Phase = fwd_phase if event.phase == "forward" else "backward"
                self.events.append(Event("free", name, held.pop(name), phase))
            else:
                self._alloc(event, rename, held, fwd_phase, k, shape)
            for name, at in lastuse.items():
                if at == position:
                    phase = fwd_phase if event.phase == "forward" else "backward"
                    self.events.append(Event("free", name, held.pop(name), phase))
        if mode == "forward":
            self._output(k, shape, final, held, "forward")
        assert not held, f"slice {k} leaves {sorted(held)} live"

    def _alloc(self, event: Event, rename: Callable[[str], str], held: dict[str, int],
               fwd_phase: Phase, k: int,
               shape: SliceShape) -> None:
        name = rename(event.tensor)
        consumes = tuple((rename(n), held.pop(rename(n))) for n, _ in event.consumes)
        elements = event.elements
        if event.op == "view" and consumes and consumes[0][1] == 0:
            elements = 0  # a view of a view that holds no storage of its own
        forward = event.phase == "forward"
        if forward and self.mode != "backward":
            self.forward_flops += event.flops
        self.events.append(event._replace(
            tensor=name, elements=elements, inputs=tuple(rename(n) for n in event.inputs),
            consumes=consumes, phase=fwd_phase if forward else "backward",
            recompute=event.recompute or (forward and fwd_phase == "backward"),
        ))
        held[name] = elements
        match = _GRADIENT.fullmatch(event.tensor)
        if match and event.phase == "backward" and int(match.group(1)) in self.acc:
            i = int(match.group(1))
            new = f"acc{i}.{k}"
            self._accumulate(self.acc[i], new, self.eq.terms[i], name, held.pop(name), shape,
                             k, "backward")
            self.acc[i] = new

    def _output(self, k: int, shape: SliceShape, final: str, held: dict[str, int],
                phase: Phase) -> None:
        name = f"{final}@{k}"
        new = f"y.{k}"
        self._accumulate(self.y, new, self.eq.output, name, held.pop(name), shape, k, phase)
        self.y = new

    def finish(self) -> None:
        """Free the upstream gradient; name the last buffers ``d{i}``."""
        if self.grad:
            self.events.append(Event("free", "gy", self.out_elements, "backward"))
        final = {name: f"d{i}" for i, name in self.acc.items()}
        if final:
            self.events = [
                e._replace(tensor=final.get(e.tensor, e.tensor)) if e.kind == "alloc" else e
                for e in self.events
            ]
            self.acc = {i: f"d{i}" for i in self.acc}
