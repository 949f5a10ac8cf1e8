"""A model of what ``torch.einsum`` and autograd do, from labels and sizes alone.

torch.einsum (ATen's ``einsum`` and ``sumproduct_pair``, torch 2.x) works like this:

- The path: with three or more operands and opt_einsum installed, torch asks
  ``opt_einsum.contract_path(equation, *operands, optimize=torch.backends.opt_einsum.strategy)``
  (``"auto"`` by default) on the equation as typed, where a size-1 dimension shares its
  label with the larger one (opt_einsum keeps the largest size of a label). With two
  operands, or without opt_einsum, it contracts left to right. ``--optimize`` plays no part.
- Every operand becomes a view with one dimension per label of the whole equation, in one
  order: the output's labels, then the ``...`` dimensions when the output lacks them, then
  the summed labels in ASCII order. Repeated labels become diagonals (strided views), missing
  labels size-1 dimensions. Nothing is copied.
- Each pairwise step first sums, in each input, the labels no other tensor still holds
  (a new tensor), then runs ``sumproduct_pair``: a ``mul`` when nothing is summed between
  the two, else ``permute`` and ``reshape`` of both inputs to ``(batch, rows, summed)`` and
  ``(batch, summed, columns)`` (the reshape copies when the permuted view cannot be
  flattened; the inputs swap sides when every column dim comes before every row dim),
  one ``bmm``, and a view of its result.
- Autograd keeps, for ``bmm`` and ``mul``, each input exactly when the other input needs a
  gradient: the reshaped tensor as given to ``bmm`` (so the copy, when the reshape copied),
  the reduced copy when a sum came first. Views, sums and copies keep nothing.

The model follows every tensor's sizes and strides through those operations, so it knows
which reshapes copy and which storage each kept tensor lives in. Retained bytes are the
distinct storages kept, the caller's operands excluded: what ``saved_tensors_hooks``
counts when it deduplicates by storage. The backward follows autograd's engine: newest
node first, layout copies of incoming gradients, both products of a ``mul`` before their
sums, one diagonal embedding per repeated label. See docs/method.md (the torch-autograd
model). No torch import here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import filterfalse

from ..model.equation import Equation, _fresh_labels, split_equation
from ..model.schedule import Event, Operation
from .backward import (
    NEW_EVENT,
    PairBackward,
    PairSide,
    StepKind,
    append_backward,
    count_flops,
    term_of,
)
from .layout import (
    AlignedTensor,
    contiguous_strides,
    memory_order,
    mul_layout,
    nested,
    packed,
    packed_dense,
)

__all__ = [
    "TorchSchedule",
    "TorchStep",
    "torch_autograd_schedule",
    "torch_einsum_path",
]

_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
_TORCH_ORDER = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

@dataclass(frozen=True, slots=True, kw_only=True)
class TorchStep:
    """One contraction as torch.einsum runs it.

    Attributes:
        kind: ``"bmm"``, ``"mul"`` (nothing summed between the inputs) or ``"sum"`` (the
            single-operand reduction).
        inputs: Schedule names of the two inputs (one for ``"sum"``).
        output: Schedule name of the result.
        reduced: Labels summed away first in each input (private to it).
        copied: Whether each input's reshape before ``bmm`` copies it.
        kept: Storage names autograd keeps for this step's backward.
        flops: FLOPs of the step's private sums and of its product.
    """

    kind: StepKind
    inputs: tuple[str, ...]
    output: str
    reduced: tuple[str, ...]
    copied: tuple[bool, ...]
    kept: tuple[str, ...]
    flops: int


@dataclass(frozen=True, slots=True, kw_only=True)
class TorchSchedule:
    """What torch.einsum and autograd do, as a schedule.

    Attributes:
        path: The pairwise path torch contracts, in opt_einsum's linear convention.
        steps: Each pairwise step (or the one reduction of a single operand).
        events: Forward then backward allocations and frees.
        forward_flops: FLOPs of the forward.
        backward_flops: FLOPs of the backward.
        operand_flops: Backward FLOPs of the products that give each operand's gradient.
        shared_flops: Backward FLOPs spent on gradients of intermediates.
        output_elements: Elements of the output's own storage (0: a view of an operand).
        retained_elements: Elements of the distinct storages autograd keeps, operands excluded.
    """

    path: tuple[tuple[int, int], ...]
    steps: tuple[TorchStep, ...]
    events: tuple[Event, ...]
    forward_flops: int
    backward_flops: int
    operand_flops: Mapping[int, int]
    shared_flops: int
    output_elements: int
    retained_elements: int


# --- parsing as torch does --------------------------------------------------------------


def _torch_rank(text: str) -> dict[str, int]:
    """Rank of each label in torch's order of summed labels (A-Z, then a-z).

    Labels torch cannot read (non-ASCII) rank as a relabelling to ASCII letters in order
    of first appearance would rank them.
    """
    labels = [c for c in dict.fromkeys(text) if c not in ",.->" and c not in " \t\n\r\x0b\x0c"]
    if all(c in _TORCH_ORDER for c in labels):
        return {c: _TORCH_ORDER.index(c) for c in labels}
    return {c: (_TORCH_ORDER.index(_LETTERS[n]) if n < len(_LETTERS) else n)
            for n, c in enumerate(labels)}


def _expand_term(term: str, ndim: int, ellipsis: Sequence[str]) -> list[str]:
    if "..." not in term:
        return list(term)
    head, tail = term.split("...")
    covered = ndim - len(head) - len(tail)
    return [*head, *ellipsis[len(ellipsis) - covered:], *tail]


_Split = tuple[list[str], "str | None"]
"""An equation's raw input terms and raw output (:func:`split_equation` of its text)."""


def _setup(eq: Equation, grad: frozenset[int], split: _Split) -> tuple[
        tuple[str, ...], list[AlignedTensor], list[bool]]:
    """The dimension order torch uses, each operand aligned to it, and which take a diagonal."""
    raw_terms, _ = split
    ellipsis = _ellipsis_labels(eq, split)
    rank = _torch_rank(eq.text)
    output = list(eq.output)
    summed_ellipsis = [c for c in ellipsis if c not in output]
    seen = set(output) | set(summed_ellipsis)
    letters = sorted({c for term in raw_terms for c in term if c != "." and c not in seen},
                     key=rank.__getitem__)
    order = (*output, *summed_ellipsis, *letters)
    position = {label: d for d, label in enumerate(order)}
    operands: list[AlignedTensor] = []
    diagonal: list[bool] = []
    for k, (term, shape) in enumerate(zip(raw_terms, eq.shapes, strict=True)):
        labels = _expand_term(term, len(shape), ellipsis)
        dims: dict[int, int] = {}  # position -> stride (diagonals add up)
        sizes: dict[int, int] = {}
        for label, size, stride in zip(labels, shape, contiguous_strides(shape), strict=True):
            d = position[label]
            dims[d] = dims.get(d, 0) + stride
            if size != 1:
                sizes[d] = size
        strides = {d: dims[d] for d in sizes}
        operands.append(AlignedTensor(sizes=sizes, strides=strides,
                                dense=_operand_dense(dims, len(order)), storage=f"in{k}",
                                needs_grad=k in grad, term=eq.terms[k], leaf=k,
                                ones="".join(c for c in dict.fromkeys(eq.terms[k])
                                             if c in eq.output and eq.size_dict[c] == 1)))
        diagonal.append(len(dims) < len(labels))
    return order, operands, diagonal


def _operand_dense(dims: dict[int, int], ndim: int) -> Callable[[], list[int]]:
    # Missing labels are unsqueezed at the end (stride 1), then permuted into place.
    return lambda: [dims.get(d, 1) for d in range(ndim)]


# --- the path ---------------------------------------------------------------------------


def torch_einsum_path(eq: Equation, strategy: str | None = "auto", *,
                      split: _Split | None = None) -> tuple[tuple[int, int], ...]:
    """The pairwise path torch.einsum contracts, in opt_einsum's linear convention.

    Args:
        eq: The parsed equation (its text as typed and its shapes are used).
        strategy: ``torch.backends.opt_einsum.strategy`` (``"auto"``, ``"greedy"`` or
            ``"optimal"``); ``None`` when opt_einsum is absent or disabled (left to right).
        split: :func:`~einsum_analyze.model.equation.split_equation` of ``eq.text``,
            when the caller has it (None: split here).

    Returns:
        One pair of positions per step; results go to the end of the list.

    Example:
        >>> from einsum_analyze.model.equation import parse_equation
        >>> torch_einsum_path(parse_equation("ab,bc,cd->ad", [(9, 2), (2, 9), (9, 2)]))
        ((1, 2), (0, 1))
    """
    n = eq.num_operands
    if n < 2:
        return ()
    if n == 2 or strategy is None:
        # Left to right: ATen puts each result in front; in the linear convention the
        # result is last, so the next step pairs position 0 with it.
        return ((0, 1),) + tuple((0, n - s) for s in range(2, n))
    from opt_einsum import paths

    from ..model.memo import deterministic_path

    terms, sizes = _opt_einsum_view(eq, split_equation(eq.text) if split is None else split)
    # The analysis's own plan asked opt_einsum the same question when its optimizer is
    # torch's (greedy, above 14 operands): the memo answers it.
    found = deterministic_path(Equation.from_terms(terms, eq.output, sizes), strategy, None)
    if found is None:
        found = paths.get_path_fn(strategy)([frozenset(term) for term in terms],
                                            frozenset(eq.output), sizes, None)
    return tuple((int(min(p)), int(max(p))) for p in found)


def _opt_einsum_view(eq: Equation, split: _Split) -> tuple[list[str], dict[str, int]]:
    """What ``opt_einsum.contract_path`` sees: raw terms, the largest size of each label."""
    raw_terms, _ = split
    ellipsis = _ellipsis_labels(eq, split)
    sizes: dict[str, int] = {}
    terms: list[str] = []
    for term, shape in zip(raw_terms, eq.shapes, strict=True):
        labels = _expand_term(term, len(shape), ellipsis)
        for label, size in zip(labels, shape, strict=True):
            if sizes.get(label, 1) == 1:
                sizes[label] = size
        terms.append("".join(labels))
    for label in eq.output:
        sizes.setdefault(label, 1)
    return terms, sizes


def _ellipsis_labels(eq: Equation, split: _Split) -> list[str]:
    """The labels the parser gave to the ``...`` dimensions, outermost first."""
    raw_terms, raw_output = split
    width = 0
    for term, shape in zip(raw_terms, eq.shapes, strict=True):
        if "..." in term:
            width = max(width, len(shape) - (len(term) - 3))
    if not width:
        return []
    used = set("".join(raw_terms)) | set(raw_output or "")
    used.discard(".")
    fresh = _fresh_labels(used)
    return [next(fresh) for _ in range(width)]


# --- the schedule -----------------------------------------------------------------------


@dataclass(slots=True)
class _Forward:
    """Forward events and the storages alive while stepping through the path."""

    events: list[Event] = field(default_factory=list)
    live: dict[str, int] = field(default_factory=dict)  # allocated storage -> elements
    kept: dict[str, int] = field(default_factory=dict)  # storages autograd keeps
    flops: int = 0
    made: list[str] = field(default_factory=list)  # allocated since the last release
    rank: dict[str, int] = field(default_factory=dict)  # storage -> allocation number

    def alloc(self, name: str, elements: int, inputs: tuple[str, ...], equation: str,
              flops: int = 0, op: Operation = "contract") -> None:
        self.events.append(NEW_EVENT(Event, ("alloc", name, elements, "forward", op, inputs,
                                             equation, "", (), flops, None, (), False, ())))
        self.live[name] = elements
        self.rank[name] = len(self.rank)
        self.made.append(name)
        self.flops += flops

    def release(self, consumed: Iterable[str], references: Mapping[str, int]) -> None:
        """Free, in allocation order, what no operand left references and autograd keeps not.

        Only a storage made since the last release or just consumed can have become
        unreferenced (``references``: how many remaining operands hold each storage), so
        a step's release looks at those alone, not at everything alive.
        """
        loose = {n for n in (*self.made, *consumed)
                 if n in self.live and n not in self.kept and not references.get(n)}
        self.made.clear()
        for name in sorted(loose, key=self.rank.__getitem__):
            self.events.append(NEW_EVENT(Event, ("free", name, self.live.pop(name), "forward",
                                                 "", (), "", "", (), 0, None, (), False, ())))


def torch_autograd_schedule(
    eq: Equation, grad: Iterable[int], *, strategy: str | None = "auto"
) -> TorchSchedule:
    """Model torch.einsum on ``eq`` under autograd, then autograd's backward.

    Args:
        eq: The parsed equation; its text as typed and its shapes decide what torch does.
        grad: Positions of the operands that require a gradient.
        strategy: ``torch.backends.opt_einsum.strategy``; ``None`` for left to right.

    Returns:
        The :class:`TorchSchedule`.

    Example:
        >>> from einsum_analyze.model.equation import parse_equation
        >>> eq = parse_equation("a,df,jef->fej", [(3,), (6, 5), (2, 4, 5)])
        >>> torch_autograd_schedule(eq, [0, 1, 2]).retained_elements  # 88 B in float64
        11
    """
    wanted = frozenset(grad)
    split = split_equation(eq.text)
    order, operands, diagonal = _setup(eq, wanted, split)
    ndim = len(order)
    out_dims = len(eq.output)
    fwd = _Forward()
    counts: dict[int, int] = {}
    for t in operands:
        for d in t.sizes:
            counts[d] = counts.get(d, 0) + 1
    path = torch_einsum_path(eq, strategy, split=split)
    ops = list(operands)
    references: dict[str, int] = {}  # storage -> operands in ops that hold it
    for t in ops:
        references[t.storage] = references.get(t.storage, 0) + 1
    steps: list[TorchStep] = []
    backs: list[PairBackward] = []
    for number, (i, j) in enumerate(path):
        a, b = ops[i], ops[j]
        del ops[j], ops[i]
        references[a.storage] -= 1
        references[b.storage] -= 1
        sum_dims: list[int] = []
        private: tuple[list[int], list[int]] = ([], [])
        # Dims of both inputs: summed once no other tensor holds them. Dims of one input:
        # summed away first when no other tensor holds them (each list in dim order).
        for d in sorted(a.sizes.keys() & b.sizes.keys()):
            if d >= out_dims:
                counts[d] -= 1
                if counts[d] == 1:
                    sum_dims.append(d)
                    counts[d] = 0
        for d in sorted(a.sizes.keys() ^ b.sizes.keys()):
            if d >= out_dims and counts[d] == 1:
                private[0 if d in a.sizes else 1].append(d)
                counts[d] = 0
        fed: list[AlignedTensor] = []
        for side, t in enumerate((a, b)):
            if not private[side]:
                fed.append(t)
                continue
            sizes = {d: s for d, s in t.sizes.items() if d not in private[side]}
            name = f"xs{number}{'ab'[side]}"
            reduced = AlignedTensor(sizes=sizes, strides=packed(sizes, sorted(sizes)),
                              dense=packed_dense(sizes, range(ndim), ndim), storage=name,
                              needs_grad=t.needs_grad, term=term_of(sizes, order) + t.ones,
                              leaf=t.leaf, ones=t.ones)
            fwd.alloc(name, math.prod(sizes.values()), (t.storage,), f"{t.term}->{reduced.term}",
                      count_flops(math.prod(t.sizes.values()), True, 1))
            fed.append(reduced)
        fa, fb = fed
        joint_sizes = {**fa.sizes, **fb.sizes}
        out_sizes = {d: s for d, s in joint_sizes.items() if d not in sum_dims}
        joint = math.prod(joint_sizes.values())
        name = f"x{eq.num_operands + number}"
        ones = "".join(dict.fromkeys(fa.ones + fb.ones))
        term = eq.output if number == len(path) - 1 else term_of(out_sizes, order) + ones
        needs = fa.needs_grad or fb.needs_grad
        copied = [False, False]
        inputs = [fa, fb]
        swap = False
        if not sum_dims:
            kind: StepKind = "mul"
            strides, dense = mul_layout(fa, fb, out_sizes, ndim)
            groups: tuple[tuple[int, ...], ...] = ()
            memories = (memory_order(fa), memory_order(fb))
        else:
            kind = "bmm"
            out_dims_sorted = sorted(out_sizes)
            in_both = fa.sizes.keys() & fb.sizes.keys()
            lro = tuple(filter(in_both.__contains__, out_dims_sorted))
            lo = tuple(filter((fa.sizes.keys() - fb.sizes.keys()).__contains__, out_dims_sorted))
            ro = tuple(filterfalse(fa.sizes.__contains__, out_dims_sorted))
            summed = tuple(sum_dims)
            # sumproduct_pair swaps the operands when every dim of the right one's
            # (its own and those of size 1 in both) comes before every dim of the left's.
            taken = set(lro) | set(lo) | set(summed)
            ro_last = next((d for d in range(ndim - 1, -1, -1) if d not in taken), -1)
            swap = bool(lo) and 0 <= ro_last < lo[0]
            rows, cols = (ro, lo) if swap else (lo, ro)
            # Each side's reshape groups, and its layout when copied: (first, last) dims
            # around the others in torch's order.
            plans = {
                "left": ((lro, rows, summed + cols),
                         (lro, summed + lo) if swap else (lro + lo + summed, ())),
                "right": ((lro, summed, cols + rows),
                          (lro + summed + lo, ()) if swap else (lro + summed, lo)),
            }
            for side, t in enumerate(fed):
                role = "right" if (side == 0) == swap else "left"
                groups_, (first, tail) = plans[role]
                if nested(t.sizes, t.strides, groups_):
                    continue
                copied[side] = True
                copy_name = f"xc{number}{'ab'[side]}"
                inputs[side] = AlignedTensor(
                    sizes=t.sizes, strides=packed(t.sizes, [d for g in groups_ for d in g]),
                    dense=packed_dense(t.sizes, first, ndim, tail), storage=copy_name,
                    needs_grad=t.needs_grad, term=term_of(t.sizes, order) + t.ones,
                    leaf=t.leaf, ones=t.ones)
                fwd.alloc(copy_name, math.prod(t.sizes.values()), (t.storage,),
                          f"{t.term}->{inputs[side].term}")
            strides = packed(out_sizes, lro + rows + summed + cols)
            dense = (packed_dense(out_sizes, lro, ndim, summed + lo) if swap
                     else packed_dense(out_sizes, lro + lo + summed, ndim))
            groups = (lro, rows, cols)
            left_memory, right_memory = lro + rows + summed, lro + summed + cols
            memories = (right_memory, left_memory) if swap else (left_memory, right_memory)
        result = AlignedTensor(sizes=out_sizes, strides=strides, dense=dense, storage=name,
                         needs_grad=needs, term=term, ones=ones)
        swapped = kind == "bmm" and swap
        left, right = (inputs[1], inputs[0]) if swapped else (inputs[0], inputs[1])
        if swapped:
            copied.reverse()
        kept = tuple(t.storage for t, other in ((left, right), (right, left))
                     if other.needs_grad and not t.storage.startswith("in"))
        for storage in kept:
            fwd.kept[storage] = fwd.live[storage]
        flops = count_flops(joint, bool(sum_dims), 2)
        fwd.alloc(name, math.prod(out_sizes.values()), (left.storage, right.storage),
                  f"{left.term},{right.term}->{term}", flops)
        ops.append(result)
        references[result.storage] = references.get(result.storage, 0) + 1
        fwd.release((a.storage, b.storage), references)
        reductions = sum(count_flops(math.prod(t.sizes.values()), True, 1)
                         for t, dims in zip((a, b), private, strict=True) if dims)
        steps.append(TorchStep(
            kind=kind, inputs=(left.storage, right.storage), output=name,
            reduced=tuple(["".join([order[d] for d in dims]) for dims in private]),
            copied=(copied[0], copied[1]), kept=kept, flops=flops + reductions))
        backs.append(PairBackward(
            kind=kind, result=result, groups=groups, kept=kept, joint=joint,
            sides=(PairSide(fa, inputs[0], a.leaf, memories[0]),
                   PairSide(fb, inputs[1], b.leaf, memories[1])),
        ))
    (last,) = ops
    output_elements = math.prod(last.sizes.values()) if last.storage in fwd.live else 0
    if not path:  # one operand: a view of it, or one sum
        summed_dims = [d for d in last.sizes if d >= out_dims]
        if ndim > out_dims:  # torch sums when a label is summed, even one of size 1
            output_elements = math.prod(s for d, s in last.sizes.items() if d < out_dims)
            flops = count_flops(math.prod(last.sizes.values()), True, 1)
            fwd.alloc("x1", output_elements, ("in0",), f"{last.term}->{eq.output}", flops)
            steps.append(TorchStep(kind="sum", inputs=("in0",), output="x1",
                                   reduced=("".join(order[d] for d in sorted(summed_dims)),),
                                   copied=(False,), kept=(), flops=flops))
        else:  # torch returns a view of the operand: nothing is allocated
            fwd.alloc("x1", 0, ("in0",), f"{last.term}->{eq.output}",
                      op="contract" if diagonal[0] else "view")
        final = "x1"
    else:
        final = last.storage
    events = fwd.events
    backward_flops, operand_flops, shared = append_backward(eq, order, diagonal, backs, final,
                                                      fwd.kept, wanted, events)
    return TorchSchedule(
        path=path, steps=tuple(steps), events=tuple(events), forward_flops=fwd.flops,
        backward_flops=backward_flops, operand_flops=operand_flops, shared_flops=shared,
        output_elements=output_elements, retained_elements=sum(fwd.kept.values()),
    )
