"""What each step of a schedule costs as its kernels run it: FLOPs, bytes, layout copies.

A step is an event that computes something: a contraction (``contract``) or a gradient
broadcast into a new tensor (``unreduce``). Seeds, views and frees move nothing.

- ``flops``: the work the lowered kernels do (:class:`~einsum_analyze.model.schedule.Kernel`),
  each kernel counted by opt_einsum's convention for what it computes: a sum of private
  indices first (two FLOPs per element read, as opt_einsum counts a one-operand sum), then
  the product (``2 * batch * left * contracted * right`` for a ``bmm``, one per output
  element for a ``mul``). A layout copy costs no FLOPs.
- ``flops_convention``: opt_einsum's convention on the step's whole equation (the
  event's ``flops``), which ignores a reduce-first order.
- ``bytes``: what the contraction must move: each input read once (the elements the
  kernel reads: a diagonal's, not its storage's) and its output written once.
- ``copy_bytes``: the layout copies the lowering makes (read and write), counted apart:
  they lower the efficiency, never the bound.
- ``launches``: the kernels the step runs: the product, each input's sum and layout
  copy (a ``reduce`` step is one sum); a ``torch.einsum`` call (a step of torch's own
  execution, or of three or more operands) counts :data:`EINSUM_LAUNCHES`. The time
  model (:mod:`.time_model`) charges each its profile's ``launch_s``.
- ``runner``: who runs the step: ``"executor"`` (ours: a lowered schedule) or ``"torch"``
  (every step of a schedule whose contractions have no kernel: the ``torch-autograd``
  model of torch.einsum under autograd); the time model adds that runner's host costs
  (:mod:`.host`).

Analysis only: no torch, no allocation.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..model.narrow import narrow_terms, vector_product
from ..model.schedule import STEP_OPERATIONS, Event, InputPrep, Kernel

__all__ = ["EINSUM_LAUNCHES", "StepCost", "StepTime", "gradient_nodes", "step_cost",
           "step_costs"]

EINSUM_LAUNCHES = 1
"""Kernels one ``torch.einsum`` call of a pairwise step costs in dispatch: one call, whose
permutes and reshapes around the product are views dispatched inside it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StepCost:
    """One step's work and traffic (see the module's docstring).

    Attributes:
        event: Position of the step's event in the strategy's schedule.
        phase: ``"forward"`` or ``"backward"``.
        tensor: The tensor the step makes.
        equation: The step's equation.
        kernel: ``"bmm"``, ``"narrow"`` (a product run as a few multiply-adds,
            :mod:`einsum_analyze.model.narrow`), ``"mul"``, ``"reduce"``, ``"copy"``,
            ``"einsum"``, ``"unreduce"``, or slicing's ``"zeros"``, ``"slice_copy"``,
            ``"accumulate"`` (their bytes are all copy bytes, outside the bound).
        flops: FLOPs of the kernels the executor runs.
        flops_convention: opt_einsum's convention on the step's equation.
        bytes: Inputs read once and the output written once.
        copy_bytes: Extra bytes of the layout copies (read and written).
        recompute: A forward contraction run again during backward.
        launches: Kernels the step runs (each costs the profile's ``launch_s``).
        runner: ``"executor"`` (ours) or ``"torch"`` (torch.einsum under autograd).
        call_operands: For a ``"torch"`` step, the operands of the torch.einsum call it
            is part of (its path search grows with them); 0 for ours.
        labels: Labels of the step's terms, its inputs' and its output's, repeats
            counted (``ab,bc->ac``: 6): the host's cost of its views grows with them.
        vector: A product run as one matrix product that is a batched matrix-vector
            product summing 2 to 4 elements (a ``narrow`` shape the executor does not
            run as multiply-adds: torch's own execution, half precision, fewer than
            2^20 outputs), which runs far below the skinny product's rate.
        outer: A ``torch.einsum`` call (torch's own execution, or our executor's
            ``einsum`` step) that torch runs as a batched outer product: one ``bmm``
            with no contracted label, and more than one element in its batch, its left
            and its right labels (``bz,bd->bzd``). cuBLAS runs it as
            many tiny matrix products, far below the copy bandwidth (the ``outer``
            class).
        folded: A reduction that finishes a broadcast product's gradient (``id->i``
            after ``id,d->id``, the gradient of ``i,d->id``): torch's product node sums
            its gradient to the operand's shape itself, so autograd's backward call
            counts it as no gradient contraction of its own (:func:`gradient_nodes`).
    """

    event: int
    phase: str
    tensor: str
    equation: str
    kernel: str
    flops: int
    flops_convention: int
    bytes: int
    copy_bytes: int
    recompute: bool = False
    launches: int = 1
    runner: str = "executor"
    call_operands: int = 0
    labels: int = 0
    vector: bool = False
    outer: bool = False
    folded: bool = False

    @property
    def intensity(self) -> float:
        """FLOPs per byte moved (0 when nothing moves)."""
        return self.flops / self.bytes if self.bytes else 0.0

    def bound_s(self, flops_per_s: float, bandwidth_bytes_per_s: float) -> float:
        """The lower-bound time: ``max(flops / rate, bytes / bandwidth)``."""
        return max(self.flops / flops_per_s, self.bytes / bandwidth_bytes_per_s)

    def predicted_s(self, flops_per_s: float, bandwidth_bytes_per_s: float,
                    launch_s: float) -> float:
        """The time model's seconds: bound, copies at the bandwidth, ``launch_s`` a kernel."""
        return (self.bound_s(flops_per_s, bandwidth_bytes_per_s)
                + self.copy_bytes / bandwidth_bytes_per_s + self.launches * launch_s)

    def to_dict(self, flops_per_s: float, bandwidth_bytes_per_s: float,
                launch_s: float = 0.0) -> dict[str, Any]:
        """One entry of a strategy's roofline ``steps`` in the JSON report."""
        compute = self.flops / flops_per_s
        memory = self.bytes / bandwidth_bytes_per_s
        return {
            "event": self.event,
            "phase": self.phase,
            "tensor": self.tensor,
            "equation": self.equation,
            "kernel": self.kernel,
            "recompute": self.recompute,
            "flops": self.flops,
            "flops_convention": self.flops_convention,
            "bytes": self.bytes,
            "copy_bytes": self.copy_bytes,
            "intensity": self.intensity,
            "bound_s": max(compute, memory),
            "limit": "compute" if compute >= memory else "memory",
            "launches": self.launches,
            "predicted_s": self.predicted_s(flops_per_s, bandwidth_bytes_per_s, launch_s),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class StepTime:
    """One step's measured time in a run (``--profile-steps``).

    Attributes:
        event: Position of the step's event in the strategy's schedule.
        phase: ``"forward"`` or ``"backward"``.
        tensor: The tensor the step makes.
        time_s: Median seconds of the step.
        bound_s: The roofline's lower bound with the run's device profile (None: none).
        predicted_s: The time model's seconds on that profile (None: none).
    """

    event: int
    phase: str
    tensor: str
    time_s: float
    bound_s: float | None = None
    predicted_s: float | None = None

    def to_dict(self, total_s: float) -> dict[str, Any]:
        """One entry of a run's ``steps`` in the JSON report."""
        return {
            "event": self.event,
            "phase": self.phase,
            "tensor": self.tensor,
            "time_s": self.time_s,
            "share": self.time_s / total_s if total_s > 0 else 0.0,
            "bound_s": self.bound_s,
            "predicted_s": self.predicted_s,
            "efficiency": (self.bound_s / self.time_s
                           if self.bound_s is not None and self.time_s > 0 else None),
        }


def _product(labels: Any, sizes: Mapping[str, int]) -> int:
    return math.prod(sizes[char] for char in set(labels))


def _read_labels(prep: InputPrep) -> tuple[str, ...]:
    """The labels of the input as the kernel reads it (before its sum and copy)."""
    if prep.reduce:
        return prep.keep + prep.reduce
    return prep.order


def _kernel_flops(kernel: Kernel, sizes: Mapping[str, int]) -> int:
    reduced = sum(2 * _product(_read_labels(p), sizes) for p in kernel.inputs if p.reduce)
    match kernel.kind:
        case "bmm":
            return reduced + 2 * _product(
                kernel.batch + kernel.left + kernel.contracted + kernel.right, sizes)
        case "mul":
            return reduced + _product(kernel.out_order, sizes)
        case _:  # "reduce" (counted above) or "copy"
            return reduced


def step_cost(event: Event, position: int, sizes: Mapping[str, int], itemsize: int) -> StepCost:
    """The cost of one computing event (``contract`` or ``unreduce``).

    Example:
        >>> from einsum_analyze import analyze
        >>> report = analyze("ijj,k->ik", [(32, 32, 32), (32,)], strategies=("reverse",))
        >>> events = report.strategies[0].events
        >>> found = [step_cost(e, n, report.equation.size_dict, 4)
        ...          for n, e in enumerate(events) if e.tensor == "d1"]
        >>> found[0].flops, found[0].flops_convention
        (4096, 65536)
    """
    lhs, _, out_term = event.equation.partition("->")
    terms = lhs.split(",") if lhs else []
    kernel = event.kernel
    copy_bytes = 0
    launches = 1
    runner = "executor"
    vector = outer = False
    if event.op in ("zeros", "slice_copy", "accumulate"):
        # Slicing's own traffic: a zero-filled buffer, a part made contiguous, a part
        # added into its accumulator. None of it is the contraction's: all copy bytes.
        name: str = event.op
        piece = _product(terms[-1], sizes) if event.op == "accumulate" and terms else 0
        flops = piece
        read = written = 0
        copy_bytes = {"zeros": event.elements, "slice_copy": 2 * event.elements,
                      "accumulate": 3 * piece}[event.op]
    elif event.op == "unreduce":
        name = "unreduce"
        flops = 0
        read = _product(terms[0], sizes) if terms else 0
        written = event.elements
    elif kernel is None or kernel.kind == "einsum":
        name = "einsum"
        flops = event.flops
        read = sum(_product(term, sizes) for term in terms)
        written = _product(out_term, sizes)
        launches = EINSUM_LAUNCHES * max(1, len(terms) - 1)
        runner = "torch" if kernel is None else "executor"  # a schedule: step_costs
        if len(terms) == 2:
            vector = _vector_shape(terms[0], terms[1], out_term, sizes)
            outer = _outer_shape(terms[0], terms[1], out_term, sizes)
    else:
        name = kernel.kind
        flops = _kernel_flops(kernel, sizes)
        read = sum(_product(_read_labels(p), sizes) for p in kernel.inputs)
        written = _product(kernel.out_order, sizes)
        copy_bytes = sum(2 * _product(p.copy, sizes) for p in kernel.inputs if p.copy)
        # A "reduce" is its input's sum, written into the output: one kernel.
        launches = 1 if kernel.kind == "reduce" else (
            (kernel.kind != "copy") + sum(bool(p.reduce) + bool(p.copy) for p in kernel.inputs))
        terms_added = narrow_terms(kernel, sizes, itemsize)
        if terms_added:
            # k multiply-adds (model.narrow): the output written k times, read k - 1
            name = "narrow"
            written *= 2 * terms_added - 1
            launches += terms_added - 1
        elif kernel.kind == "bmm":
            vector = vector_product(_product(kernel.contracted, sizes),
                                   _product(kernel.left, sizes), _product(kernel.right, sizes))
    return StepCost(
        event=position, phase=event.phase, tensor=event.tensor, equation=event.equation,
        kernel=name, flops=flops, flops_convention=event.flops,
        bytes=(read + written) * itemsize, copy_bytes=copy_bytes * itemsize,
        recompute=event.recompute, launches=max(1, launches), runner=runner,
        labels=sum(len(term) for term in terms) + len(out_term), vector=vector,
        outer=outer,
    )


def _pair_sizes(a: str, b: str, out: str,
                sizes: Mapping[str, int]) -> tuple[int, int, int, int]:
    """The batch, contracted, left and right sizes of torch's product of ``a`` and ``b``.

    Its batch labels are in both inputs and the output, its contracted ones in both
    inputs alone (labels private to one input are summed away first), its left and
    right ones in one input and the output.
    """
    both = set(a) & set(b)
    return (_product(both & set(out), sizes), _product(both - set(out), sizes),
            _product((set(a) & set(out)) - both, sizes),
            _product((set(b) & set(out)) - both, sizes))


def _vector_shape(a: str, b: str, out: str, sizes: Mapping[str, int]) -> bool:
    """Whether torch's product of ``a`` and ``b`` into ``out`` is a narrow matrix-vector one."""
    _, summed, left, right = _pair_sizes(a, b, out, sizes)
    return vector_product(summed, left, right)


def _outer_shape(a: str, b: str, out: str, sizes: Mapping[str, int]) -> bool:
    """Whether torch.einsum's product of ``a`` and ``b`` into ``out`` is a batched outer one.

    Nothing contracted, and more than one element in its batch, left and right labels.
    """
    batch, summed, left, right = _pair_sizes(a, b, out, sizes)
    return summed == 1 and batch > 1 and left > 1 and right > 1


def step_costs(events: Sequence[Event], sizes: Mapping[str, int],
               itemsize: int) -> tuple[StepCost, ...]:
    """The cost of every computing step of a schedule, in schedule order."""
    steps = tuple(
        step_cost(event, position, sizes, itemsize)
        for position, event in enumerate(events)
        if event.kind == "alloc" and event.op in STEP_OPERATIONS
    )
    if any(step.runner == "torch" for step in steps):  # torch.einsum's: every step
        operands = len({name for event in events for name in event.inputs
                        if name.startswith("in") and name[2:].isdigit()})
        folded = _folded_reductions(events)
        return tuple(replace(step, runner="torch", call_operands=operands,
                             folded=step.tensor in folded) for step in steps)
    return steps


def _folded_reductions(events: Sequence[Event]) -> frozenset[str]:
    """The backward reductions torch's product nodes make themselves (``StepCost.folded``).

    A one-input backward contraction that sums labels away from a tensor made by a
    two-input backward contraction: the broadcast product's gradient, summed to its
    operand's shape inside the same node.
    """
    products = {event.tensor: event.elements for event in events
                if event.kind == "alloc" and event.phase == "backward"
                and event.op == "contract" and len(event.inputs) == 2}
    return frozenset(
        event.tensor for event in events
        if event.kind == "alloc" and event.phase == "backward" and event.op == "contract"
        and len(event.inputs) == 1 and event.elements < products.get(event.inputs[0], 0))


def gradient_nodes(steps: Sequence[StepCost]) -> int:
    """The gradient contractions of torch autograd's backward call among ``steps``.

    Each backward step but the reductions its product nodes make themselves
    (``StepCost.folded``): the convention of the host calibration's chains, two per
    pairwise product (:mod:`einsum_analyze.backends.host_calibration`).

    Example:
        >>> from einsum_analyze import analyze
        >>> report = analyze("i,d->id", [(64,), (32,)], strategies=("torch-autograd",))
        >>> result = report.strategies[0]
        >>> steps = step_costs(result.events, result.sizes(report.equation.size_dict), 4)
        >>> sum(step.phase == "backward" for step in steps), gradient_nodes(steps)
        (4, 2)
    """
    return sum(step.phase == "backward" and not step.folded for step in steps)
