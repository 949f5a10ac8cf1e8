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
  flattened), one ``bmm``, and a view of its result.
- Autograd keeps, for ``bmm`` and ``mul``, each input exactly when the other input needs a
  gradient: the reshaped tensor as given to ``bmm`` (so the copy, when the reshape copied),
  the reduced copy when a sum came first. Views, sums and copies keep nothing.

The model follows every tensor's sizes and strides through those operations, so it knows
which reshapes copy and which storage each kept tensor lives in. Retained bytes are the
distinct storages kept, the caller's operands excluded: what ``saved_tensors_hooks``
counts when it deduplicates by storage. No torch import here.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from .equation import Equation, _fresh_labels, split_equation
from .memory import Event, simulate_memory

if TYPE_CHECKING:
    from .planning import Plan
    from .strategies import StrategyResult

__all__ = [
    "TorchSchedule",
    "TorchStep",
    "build_torch_autograd",
    "torch_autograd_schedule",
    "torch_einsum_path",
]

_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
_TORCH_ORDER = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

StepKind = Literal["bmm", "mul", "sum"]


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


# --- parsing as torch does -------------------------------------------------------------


@dataclass(slots=True)
class _Setup:
    """The equation in torch's terms."""

    order: tuple[str, ...]  # every dimension, in torch's order (labels of ``eq``)
    num_output: int  # the first ``num_output`` of ``order`` are the output's
    operands: list[_Tensor]  # each operand, aligned to ``order``
    diagonal: tuple[bool, ...]  # whether each operand repeats a label


@dataclass(slots=True)
class _Tensor:
    """A tensor aligned to torch's dimension order: sizes and strides, in elements."""

    sizes: list[int]
    strides: list[int]
    storage: str
    needs_grad: bool
    term: str  # labels as the schedule's einsum equations name the tensor
    leaf: int = -1  # the operand it is (or a reduced copy of), -1 for an intermediate


def _contiguous(sizes: Sequence[int]) -> list[int]:
    strides = [0] * len(sizes)
    running = 1
    for d in range(len(sizes) - 1, -1, -1):
        strides[d] = running
        running *= max(sizes[d], 1)
    return strides


def _torch_key(text: str) -> dict[str, int]:
    """Rank of each label in torch's summed-label order (ASCII order: A-Z before a-z).

    Labels torch cannot read (non-ASCII) are ranked as the relabelling to ASCII by first
    appearance would rank them.
    """
    labels = [c for c in dict.fromkeys(text) if c not in ",.->" and not c.isspace()]
    if all(c in _TORCH_ORDER for c in labels):
        return {c: _TORCH_ORDER.index(c) for c in labels}
    mapping = {c: _LETTERS[n] if n < len(_LETTERS) else "" for n, c in enumerate(labels)}
    return {c: (_TORCH_ORDER.index(m) if m else len(_TORCH_ORDER) + n)
            for n, (c, m) in enumerate(mapping.items())}


def _setup(eq: Equation, grad: frozenset[int]) -> _Setup:
    raw_terms, _ = split_equation(eq.text)
    ellipsis = _ellipsis_labels(eq, raw_terms)
    output = list(eq.output)
    rank = _torch_key(eq.text)
    summed_ellipsis = [c for c in ellipsis if c not in output]
    seen = set(output) | set(summed_ellipsis)
    letters = sorted({c for term in raw_terms for c in term if c != "." and c not in seen},
                     key=lambda c: rank[c])
    order = tuple(output + summed_ellipsis + letters)
    position = {label: d for d, label in enumerate(order)}
    operands: list[_Tensor] = []
    diagonal: list[bool] = []
    for k, (term, shape) in enumerate(zip(raw_terms, eq.shapes, strict=True)):
        labels = _expand_term(term, len(shape), ellipsis)
        sizes = [1] * len(order)
        strides = [-1] * len(order)
        for label, size, stride in zip(labels, shape, _contiguous(shape), strict=True):
            d = position[label]
            if strides[d] == -1:
                sizes[d] = size
                strides[d] = stride
            else:  # a repeated label: a diagonal view, the strides add up
                strides[d] += stride
        # Missing labels are unsqueezed at the end (stride 1), then permuted in place.
        strides = [1 if s == -1 else s for s in strides]
        operands.append(_Tensor(sizes=sizes, strides=strides, storage=f"in{k}",
                                needs_grad=k in grad, term=eq.terms[k], leaf=k))
        diagonal.append(len(set(labels)) < len(labels))
    return _Setup(order=order, num_output=len(output), operands=operands,
                  diagonal=tuple(diagonal))


def _expand_term(term: str, ndim: int, ellipsis: Sequence[str]) -> list[str]:
    if "..." not in term:
        return list(term)
    head, tail = term.split("...")
    covered = ndim - len(head) - len(tail)
    return [*head, *ellipsis[len(ellipsis) - covered:], *tail]


# --- the path ---------------------------------------------------------------------------


def torch_einsum_path(eq: Equation, strategy: str | None = "auto") -> tuple[tuple[int, int], ...]:
    """The pairwise path torch.einsum contracts, in opt_einsum's linear convention.

    Args:
        eq: The parsed equation (its text as typed and its shapes are used).
        strategy: ``torch.backends.opt_einsum.strategy`` (``"auto"``, ``"greedy"`` or
            ``"optimal"``); ``None`` when opt_einsum is absent or disabled (left to right).

    Returns:
        One pair of positions per step; results go to the end of the list.

    Example:
        >>> from einsum_analyze.equation import parse_equation
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

    inputs, output, sizes = _opt_einsum_view(eq)
    found = paths.get_path_fn(strategy)(inputs, output, sizes, None)
    return tuple((int(min(p)), int(max(p))) for p in found)


def _opt_einsum_view(
    eq: Equation,
) -> tuple[list[frozenset[str]], frozenset[str], dict[str, int]]:
    """What ``opt_einsum.contract_path`` sees: raw labels, the largest size of each."""
    raw_terms, _ = split_equation(eq.text)
    ellipsis = _ellipsis_labels(eq, raw_terms)
    sizes: dict[str, int] = {}
    inputs: list[frozenset[str]] = []
    for term, shape in zip(raw_terms, eq.shapes, strict=True):
        labels = _expand_term(term, len(shape), ellipsis)
        for label, size in zip(labels, shape, strict=True):
            if sizes.get(label, 1) == 1:
                sizes[label] = size
        inputs.append(frozenset(labels))
    return inputs, frozenset(eq.output), sizes


def _ellipsis_labels(eq: Equation, raw_terms: Sequence[str]) -> list[str]:
    """The labels the parser gave to the ``...`` dimensions, outermost first."""
    width = 0
    for term, shape in zip(raw_terms, eq.shapes, strict=True):
        if "..." in term:
            width = max(width, len(shape) - (len(term) - 3))
    _, raw_output = split_equation(eq.text)
    used = set("".join(raw_terms)) | set(raw_output or "")
    used.discard(".")
    fresh = _fresh_labels(used)
    return [next(fresh) for _ in range(width)]


# --- strides -----------------------------------------------------------------------------


def _viewable(sizes: Sequence[int], strides: Sequence[int],
              groups: Sequence[Sequence[int]]) -> bool:
    """Whether ``reshape`` to one dimension per group of dims is a view (ATen computeStride).

    A group may be flattened without a copy when its dims of size above 1 are nested:
    each one's stride is the next one's size times its stride. Size-1 dims never matter.
    """
    for group in groups:
        dims = [d for d in group if sizes[d] != 1]
        for outer, inner in zip(dims, dims[1:], strict=False):
            if strides[outer] != sizes[inner] * strides[inner]:
                return False
    return True


def _packed(sizes: Sequence[int], memory: Sequence[int]) -> list[int]:
    """Strides of a dense tensor laid out with ``memory`` dims outermost first."""
    strides = [1] * len(sizes)
    running = 1
    for d in reversed(memory):
        strides[d] = running
        running *= max(sizes[d], 1)
    return strides


def _mul_strides(a: _Tensor, b: _Tensor, sizes: Sequence[int]) -> list[int]:
    """Strides of ``a * b`` as TensorIterator lays its output out."""
    ndim = len(sizes)
    same_shape = a.sizes == b.sizes
    if same_shape:
        contiguous = _contiguous(sizes)
        if all(_dense_equal(t, contiguous) for t in (a, b)):
            return contiguous
        if a.strides == b.strides and _non_overlapping_dense(a):
            return list(a.strides)
    operand_strides = []
    for t in (a, b):
        operand_strides.append([
            0 if (t.sizes[d] == 1 and sizes[d] != 1) else t.strides[d] for d in range(ndim)
        ])

    def should_swap(dim0: int, dim1: int) -> int:
        for strides in operand_strides:
            s0, s1 = strides[dim0], strides[dim1]
            if s0 == 0 or s1 == 0:
                continue
            if s0 < s1:
                return -1
            if s0 > s1:
                return 1
            if sizes[dim0] > sizes[dim1]:
                return 1
        return 0

    perm = list(range(ndim - 1, -1, -1))  # fastest first
    for i in range(1, ndim):
        dim1 = i
        for dim0 in range(i - 1, -1, -1):
            comparison = should_swap(perm[dim0], perm[dim1])
            if comparison > 0:
                perm[dim0], perm[dim1] = perm[dim1], perm[dim0]
                dim1 = dim0
            elif comparison < 0:
                break
    return _packed(sizes, list(reversed(perm)))


def _dense_equal(t: _Tensor, contiguous: Sequence[int]) -> bool:
    return all(size == 1 or stride == want
               for size, stride, want in zip(t.sizes, t.strides, contiguous, strict=True))


def _non_overlapping_dense(t: _Tensor) -> bool:
    dims = sorted((d for d in range(len(t.sizes)) if t.sizes[d] != 1),
                  key=lambda d: t.strides[d])
    expected = 1
    for d in dims:
        if t.strides[d] != expected:
            return False
        expected *= t.sizes[d]
    return True


def _memory_order(t: _Tensor) -> tuple[int, ...]:
    """Dims of size above 1, outermost first (by stride)."""
    return tuple(sorted((d for d in range(len(t.sizes)) if t.sizes[d] != 1),
                        key=lambda d: -t.strides[d]))


# --- the schedule -----------------------------------------------------------------------


@dataclass(slots=True)
class _Forward:
    """Forward state while stepping through the path."""

    setup: _Setup
    size_of: dict[str, int]
    events: list[Event] = field(default_factory=list)
    live: dict[str, int] = field(default_factory=dict)  # allocated storages -> elements
    kept: dict[str, int] = field(default_factory=dict)  # storages autograd keeps
    flops: int = 0

    def alloc(self, name: str, elements: int, inputs: Iterable[str], equation: str,
              flops: int = 0, workspace: tuple[int, ...] = ()) -> None:
        self.events.append(Event(kind="alloc", tensor=name, elements=elements,
                                 phase="forward", op="contract", inputs=tuple(inputs),
                                 equation=equation, flops=flops, workspace=workspace))
        self.live[name] = elements
        self.flops += flops

    def release(self, referenced: set[str]) -> None:
        for name in [n for n in self.live if n not in referenced and n not in self.kept]:
            self.events.append(Event(kind="free", tensor=name, elements=self.live.pop(name),
                                     phase="forward"))


def _term(t: _Tensor, order: Sequence[str]) -> str:
    return "".join(order[d] for d in range(len(order)) if t.sizes[d] != 1)


def _numel(sizes: Sequence[int]) -> int:
    return math.prod(sizes)


def _flops(joint: int, summed: bool, terms: int) -> int:
    return joint * (max(1, terms - 1) + (1 if summed else 0))


@dataclass(slots=True)
class _Backward:
    """What the backward of one pairwise step needs."""

    kind: StepKind
    output: str  # the forward result's name
    sizes: tuple[int, ...]  # the result's sizes in torch's order
    output_term: str
    groups: tuple[tuple[int, ...], ...]  # bmm: (batch, rows, columns) dims of the result
    sides: tuple[tuple[_Tensor, str, _Tensor, str, int, tuple[int, ...]], ...]
    # each input: (tensor before reduction, fed name, fed tensor, fed term, leaf or -1,
    #              memory order of its gradient)
    kept: tuple[str, ...]
    joint: int
    summed: tuple[bool, bool]  # whether each side's gradient sums a label
    full: int  # elements of the broadcast product (mul)


def torch_autograd_schedule(
    eq: Equation, grad: Iterable[int], *, strategy: str | None = "auto"
) -> TorchSchedule:
    """Model torch.einsum on ``eq`` under autograd, then its backward.

    Args:
        eq: The parsed equation; its text as typed and its shapes decide what torch does.
        grad: Positions of the operands that require a gradient.
        strategy: ``torch.backends.opt_einsum.strategy``; ``None`` for left to right.

    Returns:
        The :class:`TorchSchedule`.

    Example:
        >>> from einsum_analyze.equation import parse_equation
        >>> eq = parse_equation("a,df,jef->fej", [(3,), (6, 5), (2, 4, 5)])
        >>> torch_autograd_schedule(eq, [0, 1, 2]).retained_elements  # float32: 88 B
        22
    """
    wanted = frozenset(grad)
    setup = _setup(eq, wanted)
    order = setup.order
    ndim = len(order)
    out_dims = setup.num_output
    sizes_of = {label: size for label, size in eq.size_dict.items()}
    fwd = _Forward(setup=setup, size_of=sizes_of)
    counts = [sum(1 for t in setup.operands if t.sizes[d] != 1) for d in range(ndim)]
    path = torch_einsum_path(eq, strategy)
    ops: list[_Tensor] = list(setup.operands)
    producers: dict[str, int] = {}
    steps: list[TorchStep] = []
    backs: list[_Backward] = []
    n = eq.num_operands
    num = n
    for number, (i, j) in enumerate(path):
        a, b = ops[i], ops[j]
        del ops[j]
        del ops[i]
        is_last = number == len(path) - 1
        sum_dims: list[int] = []
        a_sum: list[int] = []
        b_sum: list[int] = []
        for d in range(out_dims, ndim):
            sa, sb = a.sizes[d] != 1, b.sizes[d] != 1
            if sa and sb:
                counts[d] -= 1
                if counts[d] == 1:
                    sum_dims.append(d)
                    counts[d] = 0
            elif counts[d] == 1:
                if sa:
                    a_sum.append(d)
                    counts[d] = 0
                elif sb:
                    b_sum.append(d)
                    counts[d] = 0
        fed: list[_Tensor] = []
        reduced: list[str] = []
        for side, (t, dims) in enumerate(((a, a_sum), (b, b_sum))):
            if dims:
                new_sizes = [1 if d in dims else s for d, s in enumerate(t.sizes)]
                name = f"xs{number}{'ab'[side]}"
                reduced_t = _Tensor(sizes=new_sizes, strides=_contiguous(new_sizes),
                                    storage=name, needs_grad=t.needs_grad, term="",
                                    leaf=t.leaf)
                reduced_t.term = _term(reduced_t, order)
                fwd.alloc(name, _numel(new_sizes), (t.storage,),
                          f"{t.term}->{reduced_t.term}", _flops(_numel(t.sizes), True, 1))
                fed.append(reduced_t)
                reduced.append("".join(order[d] for d in dims))
            else:
                fed.append(t)
                reduced.append("")
        fa, fb = fed
        out_sizes = [1 if d in sum_dims else max(fa.sizes[d], fb.sizes[d]) for d in range(ndim)]
        joint = _numel([max(fa.sizes[d], fb.sizes[d]) for d in range(ndim)])
        result_name = f"x{num}"
        num += 1
        needs = fa.needs_grad or fb.needs_grad
        copied = [False, False]
        if not sum_dims:
            kind: StepKind = "mul"
            strides = _mul_strides(fa, fb, out_sizes)
            result = _Tensor(sizes=out_sizes, strides=strides, storage=result_name,
                             needs_grad=needs, term="")
            result.term = eq.output if is_last else _term(result, order)
            names = [fa, fb]
            groups: tuple[tuple[int, ...], ...] = ()
            flops = _flops(joint, False, 2)
        else:
            kind = "bmm"
            lro = [d for d in range(ndim) if d not in sum_dims
                   and fa.sizes[d] != 1 and fb.sizes[d] != 1]
            lo = [d for d in range(ndim) if d not in sum_dims
                  and fa.sizes[d] != 1 and fb.sizes[d] == 1]
            ro = [d for d in range(ndim) if d not in sum_dims and d not in lro and d not in lo]
            left_groups = (lro, lo, sum_dims + ro)
            right_groups = (lro, sum_dims, ro + lo)
            names = []
            for side, (t, groups_) in enumerate(((fa, left_groups), (fb, right_groups))):
                if _viewable(t.sizes, t.strides, groups_):
                    names.append(t)
                    continue
                copied[side] = True
                name = f"xc{number}{'ab'[side]}"
                memory = [d for g in groups_ for d in g]
                copy = _Tensor(sizes=list(t.sizes), strides=_packed(t.sizes, memory),
                               storage=name, needs_grad=t.needs_grad, term=_term(t, order))
                fwd.alloc(name, _numel(t.sizes), (t.storage,), f"{t.term}->{copy.term}")
                names.append(copy)
            memory = lro + lo + sum_dims + ro
            result = _Tensor(sizes=out_sizes, strides=_packed(out_sizes, memory),
                             storage=result_name, needs_grad=needs, term="")
            result.term = eq.output if is_last else _term(result, order)
            groups = (tuple(lro), tuple(lo), tuple(ro))
            flops = _flops(joint, True, 2)
        left, right = names
        kept: list[str] = []
        if right.needs_grad and not left.storage.startswith("in"):
            kept.append(left.storage)
        if left.needs_grad and not right.storage.startswith("in"):
            kept.append(right.storage)
        for name in kept:
            fwd.kept[name] = fwd.live[name]
        fwd.alloc(result_name, _numel(out_sizes), (left.storage, right.storage),
                  f"{left.term},{right.term}->{result.term}", flops)
        ops.append(result)
        fwd.release({t.storage for t in ops})
        steps.append(TorchStep(kind=kind, inputs=(left.storage, right.storage),
                               output=result_name, reduced=tuple(reduced),
                               copied=tuple(copied), kept=tuple(kept),
                               flops=flops + sum(_flops(_numel(t.sizes), True, 1)
                                                 for t, r in zip((a, b), reduced, strict=True)
                                                 if r)))
        sides = []
        for t, f, fed_t in ((a, fa, left), (b, fb, right)):
            if kind == "bmm":
                grad_memory = tuple(lro) + ((tuple(lo) + tuple(sum_dims)) if f is fa
                                            else (tuple(sum_dims) + tuple(ro)))
            else:
                grad_memory = _memory_order(result)
            sides.append((f, fed_t.storage, fed_t, fed_t.term, t.leaf, grad_memory))
        backs.append(_Backward(
            kind=kind, output=result_name, sizes=tuple(out_sizes), output_term=result.term, groups=groups,
            sides=tuple(sides), kept=tuple(kept), joint=joint,
            summed=(joint != _numel(fa.sizes), joint != _numel(fb.sizes)),
            full=_numel([max(fa.sizes[d], fb.sizes[d]) for d in range(ndim)]),
        ))
        producers[result_name] = len(backs) - 1
    output_elements = 0
    final_name = ""
    if n == 1:
        (t,) = ops
        if ndim > out_dims and any(t.sizes[d] != 1 for d in range(out_dims, ndim)):
            elements = _numel(t.sizes[:out_dims])
            flops = _flops(_numel(t.sizes), True, 1)
            fwd.alloc("x1", elements, ("in0",), f"{t.term}->{eq.output}", flops)
            steps.append(TorchStep(kind="sum", inputs=("in0",), output="x1", reduced=(
                "".join(order[d] for d in range(out_dims, ndim) if t.sizes[d] != 1),),
                copied=(False,), kept=(), flops=flops))
            output_elements = elements
        else:
            fwd.alloc("x1", 0, ("in0",), f"{t.term}->{eq.output}")
        final_name = "x1"
    else:
        final_name = ops[0].storage
        output_elements = fwd.live[final_name]
    retained = sum(fwd.kept.values())
    events = fwd.events
    bwd_flops, operand_flops, shared = _backward(
        eq, setup, backs, producers, final_name, output_elements, fwd.kept, wanted, events)
    return TorchSchedule(
        path=path, steps=tuple(steps), events=tuple(events), forward_flops=fwd.flops,
        backward_flops=bwd_flops, operand_flops=operand_flops, shared_flops=shared,
        output_elements=output_elements, retained_elements=retained,
    )



def _backward(
    eq: Equation,
    setup: _Setup,
    backs: Sequence[_Backward],
    producers: Mapping[str, int],
    final_name: str,
    output_elements: int,
    kept: Mapping[str, int],
    wanted: frozenset[int],
    events: list[Event],
) -> tuple[int, dict[int, int], int]:
    """Append autograd's backward: gradient products, layout copies, diagonal embeddings.

    The engine runs nodes newest first, so pairwise steps go in reverse; the views and
    diagonals made while aligning the operands are the oldest nodes and run last.
    """
    operand_flops = {k: 0 for k in sorted(wanted)}
    if not wanted:
        return 0, operand_flops, 0
    order = setup.order
    out_elements = math.prod(eq.size_dict[c] for c in eq.output)
    seed = f"g{final_name}"
    total = 0
    shared = 0

    def alloc(name: str, elements: int, op: Literal["contract", "unreduce", "view", "seed"],
              inputs: tuple[str, ...], equation: str, flops: int = 0,
              consumes: tuple[tuple[str, int], ...] = (),
              workspace: tuple[int, ...] = ()) -> None:
        events.append(Event(kind="alloc", tensor=name, elements=elements, phase="backward",
                            op=op, inputs=inputs, equation=equation, flops=flops,
                            consumes=consumes, workspace=workspace))

    def free(name: str, elements: int) -> None:
        events.append(Event(kind="free", tensor=name, elements=elements, phase="backward"))

    alloc(seed, out_elements, "seed", (), f"->{eq.output}")
    embeds: list[tuple[int, str, str, int]] = []

    def to_leaf(leaf: int, name: str, term: str, elements: int) -> None:
        if setup.diagonal[leaf]:
            embeds.append((leaf, name, term, elements))
        else:
            alloc(f"d{leaf}", elements, "view", (name,), f"{term}->{eq.terms[leaf]}",
                  consumes=((name, elements),))

    if not backs:  # one operand: a view or one sum; the gradient is a view of the seed
        to_leaf(0, seed, eq.output, out_elements)
    grads: dict[int, tuple[str, str, int, tuple[int, ...]]] = {}
    if backs:
        out_memory = tuple(d for d in range(setup.num_output) if backs[-1].sizes[d] != 1)
        grads[len(backs) - 1] = (seed, eq.output, out_elements, out_memory)
    for s in range(len(backs) - 1, -1, -1):
        if s not in grads:
            continue
        g_name, g_term, g_elements, g_memory = grads.pop(s)
        back = backs[s]
        if back.kind == "bmm" and not _viewable(back.sizes, _packed(back.sizes, g_memory),
                                                back.groups):
            # ViewBackward: the upstream gradient reshaped to the product's layout.
            copy = f"gc{s}"
            alloc(copy, g_elements, "contract", (g_name,), f"{g_term}->{g_term}")
            free(g_name, g_elements)
            g_name = copy
        consumed: list[tuple[int, str, str, int]] = []
        for side, (f, _, _, _, leaf, memory) in enumerate(back.sides):
            if not f.needs_grad:
                continue
            _, other_name, _, other_term, _, _ = back.sides[1 - side]
            compact = "".join(order[d] for d in range(len(order)) if f.sizes[d] != 1)
            elements = _numel(f.sizes)
            flops = _flops(back.joint, back.summed[side], 2)
            name = f"g{s}{'ab'[side]}"
            workspace = (back.full,) if back.kind == "mul" and back.full != elements else ()
            alloc(name, elements, "contract", (g_name, other_name),
                  f"{g_term},{other_term}->{compact}", flops, workspace=workspace)
            total += flops
            if leaf >= 0:
                operand_flops[leaf] += flops
            else:
                shared += flops
            consumed.append((leaf, name, compact, elements))
            if leaf < 0:
                grads[producers[f.storage]] = (name, compact, elements, memory)
        free(g_name, g_elements)
        for storage in back.kept:
            free(storage, kept[storage])
        for leaf, name, compact, elements in consumed:
            if leaf >= 0:
                to_leaf(leaf, name, compact, elements)
    for leaf, name, term, elements in sorted(embeds, reverse=True):
        size = math.prod(eq.shapes[leaf])
        alloc(f"d{leaf}", size, "unreduce", (name,), f"{term}->{eq.terms[leaf]}")
        free(name, elements)
    return total, operand_flops, shared


def build_torch_autograd(plan: Plan, grad: Sequence[int], itemsize: int,
                         *, strategy: str | None = "auto") -> StrategyResult:
    """The ``torch-autograd`` strategy: torch.einsum's own path and copies, under autograd.

    ``plan`` supplies only the equation: torch plans its own path, whatever ``--optimize``
    chose.

    Args:
        plan: The report's forward plan (its equation is used, not its path).
        grad: Positions of the operands that need a gradient.
        itemsize: Bytes per element.
        strategy: ``torch.backends.opt_einsum.strategy``; ``None`` for left to right.

    Returns:
        The :class:`~einsum_analyze.strategies.StrategyResult`.
    """
    from .strategies import StrategyResult

    start = time.perf_counter()
    eq = plan.equation
    schedule = torch_autograd_schedule(eq, grad, strategy=strategy)
    memory = simulate_memory(
        schedule.events,
        input_elements=sum(math.prod(shape) for shape in eq.shapes),
        output_elements=schedule.output_elements,
        itemsize=itemsize,
    )
    return StrategyResult(
        name="torch-autograd",
        events=schedule.events,
        forward_flops=schedule.forward_flops,
        backward_flops=schedule.backward_flops,
        memory=memory,
        operand_flops=dict(schedule.operand_flops),
        shared_flops=schedule.shared_flops,
        planning_s=time.perf_counter() - start,
        optimizer=f"torch.einsum ({strategy or 'left to right'})",
    )
