"""Which indices a sliced step fixes, in chunks of what length: :class:`SlicePlan`.

A slice fixes each sliced index to one chunk of its range. Slice ``k`` is numbered in
row-major order over the chunks of the indices (the last index varies fastest). A chunk
length need not divide the index's size: the last chunk of an index is then shorter, and
the slices that hold it have a schedule of their own (same path, smaller sizes).

Each distinct chunk length of an index gets a label of its own (:func:`chunk_labels`):
the events of a slice name the slice's tensors with those labels, so one size per
label holds across the whole sliced schedule.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import PlanningError
from ..model.equation import Equation

__all__ = ["SlicePlan", "chunk_labels", "slice_equation"]


@dataclass(frozen=True, slots=True)
class SlicePlan:
    """The indices a sliced step fixes and how it cuts them.

    Attributes:
        indices: The sliced labels, in the order slices are numbered (last fastest).
        sizes: The full size of each.
        chunks: The chunk length of each (the last chunk may be shorter).

    Example:
        >>> p = SlicePlan(("b", "n"), (5, 4), (2, 4))
        >>> p.count, p.ranges(2)
        (3, (('b', 4, 5), ('n', 0, 4)))
    """

    indices: tuple[str, ...]
    sizes: tuple[int, ...]
    chunks: tuple[int, ...]

    def __post_init__(self) -> None:
        if not len(self.indices) == len(self.sizes) == len(self.chunks):
            raise ValueError("a slice plan needs one size and one chunk per index")
        if len(set(self.indices)) != len(self.indices):
            raise ValueError(f"a slice plan names an index twice: {self.indices}")
        for label, size, chunk in zip(self.indices, self.sizes, self.chunks, strict=True):
            if not 1 <= chunk <= max(size, 1):
                raise ValueError(f"index {label!r} of size {size} cannot take chunks of {chunk}")

    @classmethod
    def none(cls) -> SlicePlan:
        """No slicing: one slice, the whole step."""
        return cls((), (), ())

    @classmethod
    def of(cls, chunks: Mapping[str, int], size_dict: Mapping[str, int]) -> SlicePlan:
        """A plan from chunk lengths by label (labels in the mapping's order).

        Raises:
            PlanningError: A label the equation does not have.
        """
        for label in chunks:
            if label not in size_dict:
                raise PlanningError(f"cannot slice index {label!r}: the equation has no such "
                                    f"index (its indices: {''.join(size_dict)})")
        return cls(tuple(chunks), tuple(size_dict[c] for c in chunks),
                   tuple(min(int(n), size_dict[c]) or 1 for c, n in chunks.items()))

    @property
    def counts(self) -> tuple[int, ...]:
        """Chunks per index."""
        return tuple(-(-size // chunk) for size, chunk in zip(self.sizes, self.chunks,
                                                              strict=True))

    @property
    def count(self) -> int:
        """Number of slices."""
        return math.prod(self.counts)

    def positions(self, k: int) -> tuple[int, ...]:
        """The chunk number of each index in slice ``k``."""
        if not 0 <= k < self.count:
            raise IndexError(f"slice {k} of {self.count}")
        out: list[int] = []
        for n in reversed(self.counts):
            k, rest = divmod(k, n)
            out.append(rest)
        return tuple(reversed(out))

    def ranges(self, k: int) -> tuple[tuple[str, int, int], ...]:
        """Slice ``k``'s range of each index: ``(label, start, stop)``."""
        return tuple(
            (label, pos * chunk, min((pos + 1) * chunk, size))
            for label, size, chunk, pos in zip(self.indices, self.sizes, self.chunks,
                                               self.positions(k), strict=True)
        )

    def lengths(self, k: int) -> tuple[int, ...]:
        """Slice ``k``'s length along each index."""
        return tuple(stop - start for _, start, stop in self.ranges(k))

    def shapes(self) -> dict[tuple[int, ...], list[int]]:
        """The slices grouped by their lengths (one schedule each), in slice order."""
        groups: dict[tuple[int, ...], list[int]] = {}
        for k in range(self.count):
            groups.setdefault(self.lengths(k), []).append(k)
        return groups

    @classmethod
    def from_dict(cls, section: Mapping[str, Any]) -> SlicePlan:
        """The plan of a report's ``slicing`` section (``indices``, ``sizes``, ``chunks``).

        Example:
            >>> SlicePlan.from_dict(SlicePlan(("n",), (7,), (3,)).to_dict()).count
            3
        """
        return cls(tuple(section["indices"]), tuple(section["sizes"]),
                   tuple(section["chunks"]))

    def to_dict(self) -> dict[str, object]:
        """The plan's part of the JSON ``slicing`` section."""
        return {"indices": list(self.indices), "sizes": list(self.sizes),
                "chunks": list(self.chunks), "count": self.count}

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.count))


def chunk_labels(equation: Equation, plan: SlicePlan) -> dict[tuple[str, int], str]:
    """A fresh label for each sliced index and each chunk length it takes.

    Labels not in the equation, drawn from Greek letters onwards.
    """
    used = set(equation.size_dict)
    fresh = (chr(code) for code in itertools.count(0x3B1)
             if chr(code).isalpha() and chr(code) not in used)
    labels: dict[tuple[str, int], str] = {}
    for label, size, chunk in zip(plan.indices, plan.sizes, plan.chunks, strict=True):
        for length in sorted({chunk, size - (-(-size // chunk) - 1) * chunk}, reverse=True):
            labels[(label, length)] = next(fresh)
    return labels


def slice_equation(
    equation: Equation, plan: SlicePlan, lengths: Sequence[int],
    labels: Mapping[tuple[str, int], str],
) -> tuple[Equation, dict[str, str]]:
    """The equation of one slice, the sliced labels renamed to their chunk labels.

    Returns:
        The slice's equation (sizes: the chunk lengths) and the renaming by label.
    """
    rename = {label: labels[(label, length)]
              for label, length in zip(plan.indices, lengths, strict=True)}
    sizes = dict(equation.size_dict)
    for label, length in zip(plan.indices, lengths, strict=True):
        sizes[rename[label]] = length
    terms = ["".join(rename.get(c, c) for c in term) for term in equation.terms]
    output = "".join(rename.get(c, c) for c in equation.output)
    return Equation.from_terms(terms, output, sizes), rename
