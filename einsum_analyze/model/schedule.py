"""The records of a schedule: events, and the kernels the lowering attaches to them.

Records only, no logic: :mod:`einsum_analyze.model.memory` replays events,
:mod:`einsum_analyze.model.lowering` chooses kernels, the strategies build schedules and the
executors run them. Every one of them imports these records from here, so none of them
imports another for a type.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

__all__ = ["STEP_OPERATIONS", "Event", "EventKind", "InputPrep", "Kernel", "KernelKind",
           "Operation", "Phase"]

KernelKind = Literal["bmm", "mul", "reduce", "copy", "einsum"]


class InputPrep(NamedTuple):
    """What happens to one input before the product.

    Named tuples, this and :class:`Kernel`, rather than frozen dataclasses: the lowering
    builds thousands per schedule, and a tuple is built several times faster.

    Attributes:
        reduce: Labels summed away first (private to this input, size other than 1).
        keep: Memory order of the labels kept by the sum (when ``reduce``).
        copy: Memory order of a dense copy made before the product; empty for none.
        order: Memory order of the input as the product reads it (size-1 labels left out).
    """

    reduce: tuple[str, ...]
    keep: tuple[str, ...]
    copy: tuple[str, ...]
    order: tuple[str, ...]


class Kernel(NamedTuple):
    """How the executor computes one contraction.

    Attributes:
        kind: ``"bmm"``, ``"mul"`` (no index summed between inputs), ``"reduce"`` (one
            input, indices summed), ``"copy"`` (one input, nothing summed) or ``"einsum"``
            (a torch.einsum call of torch's own execution, in the model of torch autograd;
            a plan's steps are pairwise, :mod:`~einsum_analyze.model.pairwise`).
        inputs: Preparation of each input.
        batch: Batch labels of the product, in order.
        left: Labels of the first input kept in the output.
        contracted: Labels summed by the product.
        right: Labels of the second input kept in the output.
        out_order: Memory order of the output's labels (size other than 1).
        workspace: Elements of each temporary, in allocation order.
        promote: Inputs whose dense copy replaces them once the step is done, because
            they are kept for backward: one tensor is kept, not two, and the backward
            product reads the copy without copying again.
        upcast: The cpu's float32 temporaries of a half-precision sum of an input, one
            entry per such sum: elements of the step's own tensors then live (its
            output, for a ``"reduce"``; the buffers its inputs' preparations made so
            far, for a product), and the float32 elements the sum adds. The memory
            replay counts them on the cpu for 2-byte dtypes.
    """

    kind: KernelKind
    inputs: tuple[InputPrep, ...]
    batch: tuple[str, ...] = ()
    left: tuple[str, ...] = ()
    contracted: tuple[str, ...] = ()
    right: tuple[str, ...] = ()
    out_order: tuple[str, ...] = ()
    workspace: tuple[int, ...] = ()
    promote: tuple[int, ...] = ()
    upcast: tuple[tuple[int, int], ...] = ()


EventKind = Literal["alloc", "free"]
Phase = Literal["forward", "backward"]
Operation = Literal["", "contract", "unreduce", "view", "seed", "zeros", "slice",
                    "slice_copy", "accumulate"]

STEP_OPERATIONS: tuple[Operation, ...] = ("contract", "unreduce", "zeros", "slice_copy",
                                          "accumulate")
"""Operations that compute or move data: the steps the roofline costs and
``--profile-steps`` times (a view, a slice view and the seed move nothing)."""


class Event(NamedTuple):
    """Allocate or free one tensor.

    A named tuple rather than a frozen dataclass: schedules of large networks hold
    hundreds of thousands of events, and a tuple is built three times faster.

    An allocation also says how its tensor is computed, so that an executor can run the
    schedule exactly as the memory model replays it.

    Attributes:
        kind: ``"alloc"`` or ``"free"``.
        tensor: The tensor's name, unique among the live tensors of a schedule (e.g.
            ``"x20"``, ``"g3"``); only a recomputed forward tensor is allocated twice.
            The caller's operands are ``"in0"``, ``"in1"``, ... and are never allocated.
        elements: Elements the event allocates or frees.
        phase: ``"forward"`` or ``"backward"``.
        op: How an allocated tensor is computed: ``"contract"`` (an einsum of ``inputs``),
            ``"unreduce"`` (broadcast and diagonal-embed one input into a new tensor),
            ``"view"`` (a permuted or broadcast view that takes over its input's storage),
            ``"seed"`` (the upstream gradient, made by the caller), ``"zeros"`` (a
            zero-filled tensor of the equation's output term), ``"slice"`` (a view of
            part of its input: ``ranges``; it holds no storage of its own, so its
            ``elements`` are 0), ``"slice_copy"`` (the same part copied into a fresh
            contiguous tensor), ``"accumulate"`` (adds its second input into the part
            ``ranges`` of its first, in place, and takes the first over under a new
            name: ``consumes`` names it). A sliced schedule (:mod:`einsum_analyze.slicing`)
            uses the last four; the equation of each maps the input's labels to the
            slice's (``"abc->aßc"``: label ``b`` sliced, ``ß`` its chunk).
        inputs: Names of the tensors the computation reads.
        equation: The computation as an einsum-like equation over labels.
        view: For ``"contract"``: the term the result is viewed as (broadcast or permuted);
            empty when the result is used as computed.
        consumes: Inputs whose storage ends with this event (a view takes it over).
        flops: FLOPs of the computation (opt_einsum convention).
        kernel: How the executor runs a contraction (set by :mod:`einsum_analyze.model.lowering`).
        workspace: Elements of the temporaries the computation allocates and frees
            before the event ends, in allocation order.
        recompute: A forward contraction run again during backward (checkpointing): it
            reads forward tensors as the forward pass does (never conjugated) and
            makes a forward tensor under its forward name, which its first copy freed.
            A fused sliced step runs each slice's forward contractions in the backward
            call, marked the same way.
        ranges: For ``"slice"``, ``"slice_copy"`` and ``"accumulate"``: the part, as
            ``(label, start, stop)`` for each sliced label of the full tensor's term.
    """

    kind: EventKind
    tensor: str
    elements: int
    phase: Phase
    op: Operation = ""
    inputs: tuple[str, ...] = ()
    equation: str = ""
    view: str = ""
    consumes: tuple[tuple[str, int], ...] = ()
    flops: int = 0
    kernel: Kernel | None = None
    workspace: tuple[int, ...] = ()
    recompute: bool = False
    ranges: tuple[tuple[str, int, int], ...] = ()
