"""Hypothesis strategies for einsum problems, independent of einsum_analyze.

The generated equations are what numpy and torch accept: 1 to 5 operands, sizes 1 to 4,
repeated labels inside one term, labels private to one operand, size-1 dimensions that
broadcast, upper-case labels, implicit output and ``...`` (right-aligned broadcasting).
"""

from __future__ import annotations

import string
from dataclasses import dataclass

from hypothesis import strategies as st

__all__ = [
    "LABELS",
    "EinsumProblem",
    "einsum_problems",
    "grad_subsets",
    "relabel",
    "relabellings",
]

LABELS = "abcdefghijABCDE"
"""A small alphabet, so that operands share labels often."""


@dataclass(frozen=True)
class EinsumProblem:
    """A generated einsum: equation text and one shape per operand.

    Attributes:
        equation: As a user writes it (explicit or implicit, maybe with ``...``).
        shapes: One shape per operand.
        implicit: The equation has no ``->``.
        ellipsis: Some term has ``...``.
        output_drops_ellipsis: An operand has ``...`` with dimensions but the explicit
            output has no ``...`` (torch sums them; numpy refuses).
    """

    equation: str
    shapes: tuple[tuple[int, ...], ...]
    implicit: bool
    ellipsis: bool
    output_drops_ellipsis: bool

    @property
    def repeats_a_label(self) -> bool:
        """Some operand holds a label twice (a diagonal)."""
        lhs = self.equation.split("->")[0].replace("...", "")
        return any(len(set(term)) < len(term) for term in lhs.split(","))

    def __repr__(self) -> str:
        return f"EinsumProblem({self.equation!r}, {list(self.shapes)!r})"


def _chance(draw: st.DrawFn, percent: int) -> bool:
    """True about ``percent`` times in a hundred (False when shrunk)."""
    return draw(st.integers(0, 99)) >= 100 - percent


@st.composite
def einsum_problems(
    draw: st.DrawFn,
    *,
    min_operands: int = 1,
    max_operands: int = 5,
    max_rank: int = 4,
    max_size: int = 4,
    repeats: bool = True,
    broadcast: bool = True,
    ellipsis: bool = True,
    implicit: bool = True,
    alphabet: str = LABELS,
) -> EinsumProblem:
    """Random einsum problems; switch features off with the keyword flags."""
    num_operands = draw(st.integers(min_operands, max_operands))
    pool_size = draw(st.integers(1, min(8, len(alphabet))))
    pool = draw(
        st.lists(st.sampled_from(alphabet), min_size=pool_size, max_size=pool_size, unique=True)
    )
    sizes = {label: draw(st.integers(1, max_size)) for label in pool}

    terms: list[list[str]] = []
    for _ in range(num_operands):
        rank = draw(st.integers(0, max_rank))
        if not repeats:
            rank = min(rank, len(pool))
        terms.append(
            draw(st.lists(st.sampled_from(pool), min_size=rank, max_size=rank, unique=not repeats))
        )

    # Named dimensions: a label may be size 1 in one operand and larger elsewhere.
    shapes: list[list[int]] = []
    for term in terms:
        ones = {
            label for label in dict.fromkeys(term)
            if broadcast and sizes[label] > 1 and _chance(draw, 25)
        }
        shapes.append([1 if label in ones else sizes[label] for label in term])

    # Ellipsis: a batch shape right-aligned into the operands that carry '...'.
    texts = ["".join(term) for term in terms]
    width = 0
    has_dots = [False] * num_operands
    if ellipsis and _chance(draw, 50):
        batch = draw(st.lists(st.integers(1, max_size), min_size=1, max_size=2))
        for number in range(num_operands):
            if not draw(st.booleans()):
                continue
            has_dots[number] = True
            take = draw(st.integers(0, len(batch)))
            dims = [
                1 if broadcast and dim > 1 and _chance(draw, 25) else dim
                for dim in batch[len(batch) - take:]
            ]
            width = max(width, take)
            where = draw(st.integers(0, len(terms[number])))
            texts[number] = texts[number][:where] + "..." + texts[number][where:]
            shapes[number][where:where] = dims

    is_implicit = implicit and _chance(draw, 35)
    drops = False
    if is_implicit:
        equation = ",".join(texts)
    else:
        present = list(dict.fromkeys("".join("".join(t) for t in terms)))
        output = "".join(
            draw(st.lists(st.sampled_from(present), unique=True)) if present else []
        )
        if any(has_dots):
            if _chance(draw, 35):
                drops = width > 0
            else:
                where = draw(st.integers(0, len(output)))
                output = output[:where] + "..." + output[where:]
        equation = ",".join(texts) + "->" + output

    return EinsumProblem(
        equation=equation,
        shapes=tuple(tuple(shape) for shape in shapes),
        implicit=is_implicit,
        ellipsis=any(has_dots),
        output_drops_ellipsis=drops,
    )


def relabel(equation: str, mapping: dict[str, str]) -> str:
    """Rename the labels of ``equation`` with ``mapping`` (other characters are kept)."""
    return "".join(mapping.get(char, char) for char in equation)


@st.composite
def relabellings(draw: st.DrawFn, alphabet: str = string.ascii_letters) -> dict[str, str]:
    """A random one-to-one renaming of every letter of ``alphabet``."""
    image = draw(st.permutations(alphabet))
    return dict(zip(alphabet, image, strict=True))


@st.composite
def grad_subsets(draw: st.DrawFn, num_operands: int) -> list[int]:
    """Sorted operand positions that need a gradient: any subset, empty and full included."""
    if num_operands == 0:
        return []
    chosen = draw(st.sets(st.integers(0, num_operands - 1), max_size=num_operands))
    return sorted(chosen)
