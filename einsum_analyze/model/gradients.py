"""Derive the gradient contraction of each operand (docs/method.md section 4).

For ``Y = einsum(s_1, ..., s_n -> o)`` and upstream gradient ``G`` (labels ``o``), the
gradient of operand ``k`` is:

1. the core contraction ``einsum(o, s_j for j != k -> t_k)``, where ``t_k`` holds the
   distinct labels of ``s_k`` that occur in ``o`` or in another operand;
2. broadcast along the labels of ``s_k`` that occur nowhere else (they were summed
   away in the forward pass);
3. diagonal embedding where ``s_k`` repeats a label (zero off the diagonal).

Steps 2 and 3 together are one *unreduce* from labels ``t_k`` to term ``s_k``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .equation import Equation
from .planning import size_of
from .types import Term

__all__ = ["GradientSpec", "UPSTREAM", "derive_gradient", "derive_gradients", "unreduce_kind"]

UPSTREAM = -1
"""Source id of the upstream gradient ``G`` in a core contraction."""


def unreduce_kind(source: Term, target: Term) -> str:
    """How a tensor with labels ``source`` becomes one with term ``target``.

    Returns:
        ``"none"`` when the labels and their order already match, ``"view"`` when a
        permuted or broadcast view suffices (no repeated label in ``target``), and
        ``"embed"`` when ``target`` repeats a label and a zero-filled tensor is written.

    Example:
        >>> unreduce_kind("ik", "ijk"), unreduce_kind("ij", "ijj"), unreduce_kind("ab", "ab")
        ('view', 'embed', 'none')
    """
    if source == target:
        return "none"
    if len(set(target)) < len(target):
        return "embed"
    return "view"


@dataclass(frozen=True, slots=True, kw_only=True)
class GradientSpec:
    """The gradient of one operand.

    Attributes:
        operand: Position of the operand.
        term: The operand's term ``s_k`` (may repeat labels).
        core_terms: Terms of the core contraction's inputs: ``o`` first, then ``s_j``.
        core_sources: What each core input is: :data:`UPSTREAM` or an operand position.
        core_output: ``t_k``, in order of first appearance in ``s_k``.
        broadcast: Labels of ``s_k`` found nowhere else (summed away in forward).
        has_diagonal: Whether ``s_k`` repeats a label.
        core_elements: Elements of the core result.
        elements: Elements of the gradient (the operand's size).
    """

    operand: int
    term: Term
    core_terms: tuple[Term, ...]
    core_sources: tuple[int, ...]
    core_output: Term
    broadcast: str
    has_diagonal: bool
    core_elements: int
    elements: int

    @property
    def core_equation(self) -> str:
        """The core contraction, e.g. ``'ik,k->i'`` for operand 0 of ``ijj,k->ik``."""
        return ",".join(self.core_terms) + "->" + self.core_output

    @property
    def unreduce(self) -> str:
        """``"none"``, ``"view"`` or ``"embed"``: see :func:`unreduce_kind`."""
        return unreduce_kind(self.core_output, self.term)

    def core(self, equation: Equation) -> Equation:
        """The core contraction as an equation of its own, to plan like any other."""
        return Equation.from_terms(self.core_terms, self.core_output, equation.size_dict)


def derive_gradient(equation: Equation, operand: int) -> GradientSpec:
    """Derive the gradient contraction of one operand.

    Args:
        equation: The normalised forward equation.
        operand: Position of the operand to differentiate.

    Returns:
        Its :class:`GradientSpec`.

    Example:
        >>> from einsum_analyze import parse_equation
        >>> eq = parse_equation("ijj,k->ik", [(2, 3, 3), (4,)])
        >>> spec = derive_gradient(eq, 0)
        >>> spec.core_equation, spec.broadcast, spec.has_diagonal
        ('ik,k->i', 'j', True)
    """
    terms = equation.terms
    term = terms[operand]
    elsewhere = set(equation.output)
    for number, other in enumerate(terms):
        if number != operand:
            elsewhere.update(other)
    distinct = "".join(dict.fromkeys(term))
    core_output = "".join(char for char in distinct if char in elsewhere)
    broadcast = "".join(char for char in distinct if char not in elsewhere)
    others = [number for number in range(len(terms)) if number != operand]
    return GradientSpec(
        operand=operand,
        term=term,
        core_terms=(equation.output, *(terms[j] for j in others)),
        core_sources=(UPSTREAM, *others),
        core_output=core_output,
        broadcast=broadcast,
        has_diagonal=len(distinct) < len(term),
        core_elements=size_of(core_output, equation.size_dict),
        elements=size_of(term, equation.size_dict),
    )


def derive_gradients(equation: Equation, operands: Sequence[int]) -> tuple[GradientSpec, ...]:
    """Derive the gradient of every operand in ``operands`` (positions, in order)."""
    return tuple(derive_gradient(equation, k) for k in operands)
