"""ATen's layout rules, on sizes and strides alone: which reshapes copy, how outputs lie.

Dims are positions in one order shared by all tensors of an einsum (torch's aligned
order); a tensor lists only its dims of size above 1, with their strides in elements, and
can give the strides of all its dims (TensorIterator reads those of size-1 dims too).
Used by :mod:`einsum_analyze.torch_model.forward`. No torch import here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate
from operator import mul
from typing import Protocol

__all__ = [
    "AlignedTensor",
    "Layout",
    "contiguous_strides",
    "memory_order",
    "mul_layout",
    "nested",
    "packed",
    "packed_dense",
    "packed_nests",
]


class Layout(Protocol):
    """A tensor's layout: its dims above 1 with sizes and strides, and all its strides."""

    @property
    def sizes(self) -> dict[int, int]:
        """Size of every dim above 1."""

    @property
    def strides(self) -> dict[int, int]:
        """Stride of each of those dims."""

    @property
    def dense(self) -> Callable[[], list[int]]:
        """A function giving the strides of all dims, size-1 ones included."""


@dataclass(slots=True)
class AlignedTensor:
    """A tensor aligned to torch's dimension order (dims of size 1 left implicit).

    Attributes:
        sizes: Size of every dim above 1, by position in torch's order.
        strides: Stride of each of those dims, in elements.
        dense: Strides of every dim, size-1 ones included (TensorIterator reads them).
        storage: Schedule name of the storage it views.
        needs_grad: Whether autograd tracks it.
        term: Its labels in the schedule's einsum equations.
        leaf: The operand it is, or a reduced copy of; -1 for an intermediate.
        ones: The output's size-1 labels it holds: kept in its term so that the
            schedule's einsum equations stay runnable.
    """

    sizes: dict[int, int]
    strides: dict[int, int]
    dense: Callable[[], list[int]]
    storage: str
    needs_grad: bool
    term: str
    leaf: int = -1
    ones: str = ""


def contiguous_strides(sizes: Sequence[int]) -> list[int]:
    """Strides of a contiguous tensor of these sizes, in elements.

    Example:
        >>> contiguous_strides([2, 3, 4])
        [12, 4, 1]
    """
    strides = [0] * len(sizes)
    running = 1
    for d in range(len(sizes) - 1, -1, -1):
        strides[d] = running
        running *= sizes[d]
    return strides


def nested(sizes: Mapping[int, int], strides: Mapping[int, int],
            groups: Iterable[Sequence[int]]) -> bool:
    """Whether each group of dims flattens without a copy.

    It does when the group's dims of size above 1 nest: each one's stride is the next
    one's size times its stride. Size-1 dims never matter.
    """
    for group in groups:
        dims = list(filter(sizes.__contains__, group))
        if len(dims) < 2:
            continue
        # The loops run in C: a large network's intermediates have hundreds of dims.
        given = list(map(strides.__getitem__, dims))
        inner_sizes = map(sizes.__getitem__, dims[1:])
        if given[:-1] != list(map(mul, inner_sizes, given[1:])):
            return False
    return True


def packed_nests(sizes: Mapping[int, int], memory: Sequence[int],
                 groups: Iterable[Sequence[int]]) -> bool:
    """``nested(sizes, packed(sizes, memory), groups)``, without building the strides.

    In a dense layout of dims of sizes 2 and above, a dim's stride times its size is the
    stride of the dim just outside it in memory, and no two dims share a stride: a group
    flattens exactly when its dims above 1 lie side by side in ``memory``, in the group's
    order. With a dim of size 0, or a ``memory`` that does not hold each dim once, the
    strides are computed.
    """
    order = list(filter(sizes.__contains__, memory))
    if len(order) != len(sizes) or len(set(order)) != len(order) or 0 in sizes.values():
        return nested(sizes, packed(sizes, memory), groups)
    for group in groups:
        dims = list(filter(sizes.__contains__, group))
        if len(dims) < 2:
            continue
        start = order.index(dims[0])
        if order[start:start + len(dims)] != dims:
            return False
    return True


def packed(sizes: Mapping[int, int], memory: Sequence[int]) -> dict[int, int]:
    """Strides of the dims above 1 of a dense tensor laid out as ``memory`` (outermost first)."""
    dims = list(filter(sizes.__contains__, reversed(memory)))
    if not dims:
        return {}
    # Innermost first: each stride is the product of the sizes inside it.
    inner = accumulate(map(sizes.__getitem__, dims[:-1]), mul, initial=1)
    return dict(zip(dims, inner, strict=True))


def packed_dense(sizes: Mapping[int, int], first: Sequence[int], ndim: int,
                  last: Sequence[int] = ()) -> Callable[[], list[int]]:
    """All strides of a dense tensor laid out as ``first``, the other dims, then ``last``."""

    def dense() -> list[int]:
        placed = set(first) | set(last)
        memory = [*first, *(d for d in range(ndim) if d not in placed), *last]
        strides = [0] * ndim
        running = 1
        for d in reversed(memory):
            strides[d] = running
            running *= sizes.get(d, 1)
        return strides

    return dense


def mul_layout(a: Layout, b: Layout, sizes: Mapping[int, int],
               ndim: int) -> tuple[dict[int, int], Callable[[], list[int]]]:
    """Strides of ``a * b`` as TensorIterator lays its output out.

    Args:
        a: The first factor.
        b: The second factor.
        sizes: The product's dims of size above 1 (the broadcast of both).
        ndim: Number of dims, size-1 ones included.

    Returns:
        The product's strides of its dims above 1, and a function giving all its strides.
    """
    full = [sizes.get(d, 1) for d in range(ndim)]
    dense_a, dense_b = a.dense(), b.dense()
    if a.sizes == b.sizes:
        contiguous = contiguous_strides(full)
        if all(a.strides[d] == contiguous[d] and b.strides[d] == contiguous[d]
               for d in a.sizes):
            return {d: contiguous[d] for d in sizes}, lambda: contiguous
        if dense_a == dense_b and _non_overlapping_dense(a):
            return dict(a.strides), lambda: dense_a
    operand_strides = [
        [0 if (d not in t.sizes and d in sizes) else dense[d] for d in range(ndim)]
        for t, dense in ((a, dense_a), (b, dense_b))
    ]

    def should_swap(dim0: int, dim1: int) -> int:
        for strides in operand_strides:
            s0, s1 = strides[dim0], strides[dim1]
            if s0 == 0 or s1 == 0:
                continue
            if s0 != s1:
                return -1 if s0 < s1 else 1
            if full[dim0] > full[dim1]:
                return 1
        return 0

    perm = list(range(ndim - 1, -1, -1))  # fastest first, then insertion-sorted
    for i in range(1, ndim):
        dim1 = i
        for dim0 in range(i - 1, -1, -1):
            comparison = should_swap(perm[dim0], perm[dim1])
            if comparison > 0:
                perm[dim0], perm[dim1] = perm[dim1], perm[dim0]
                dim1 = dim0
            elif comparison < 0:
                break
    memory = perm[::-1]
    dense = [0] * ndim
    running = 1
    for d in perm:
        dense[d] = running
        running *= full[d]
    return packed(sizes, memory), lambda: dense


def _non_overlapping_dense(t: Layout) -> bool:
    expected = 1
    for d in sorted(t.sizes, key=t.strides.__getitem__):
        if t.strides[d] != expected:
            return False
        expected *= t.sizes[d]
    return True


def memory_order(t: Layout) -> tuple[int, ...]:
    """Dims above 1, outermost first."""
    return tuple(sorted(t.sizes, key=lambda d: -t.strides[d]))
