"""Parse and normalise an einsum equation against operand shapes.

After :func:`parse_equation` every later stage sees plain subscripts: no ``...``, no
implicit output, and one size per label. Size-1 dimensions that broadcast against a
larger one get a fresh label private to their operand (docs/method.md section 1).
"""

from __future__ import annotations

import operator
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from ..errors import EquationError, ShapeError
from .types import Label, Shape, Term

__all__ = ["MAX_DIM", "Equation", "parse_equation", "shapes_from_sizes", "split_equation"]

MAX_DIM = 2**40
"""Largest accepted size of one dimension (about 1.1e12); larger is treated as a typo."""

_ELLIPSIS = "..."
_ASCII_LABELS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
_DIGITS = "0123456789"
_PLAIN = frozenset(_ASCII_LABELS + _DIGITS + ",.->")
_ASCII_SPACE = dict.fromkeys(map(ord, " \t\n\r\x0b\x0c"))


@dataclass(frozen=True, slots=True, kw_only=True)
class Equation:
    """A normalised einsum: explicit output, no ellipsis, one size per label.

    Attributes:
        text: The equation as the user wrote it.
        terms: One term per operand, with ellipsis and broadcast dimensions relabelled.
        output: The output term.
        shapes: The operand shapes, in operand order.
        size_dict: The size of every label (do not mutate).
        broadcast_terms: The terms before size-1 broadcast dimensions were relabelled
            (``...`` expanded), as opt_einsum plans them; None when nothing was relabelled.

    Example:
        >>> eq = parse_equation("ab,bc", [(2, 3), (3, 4)])
        >>> eq.explicit
        'ab,bc->ac'
    """

    text: str
    terms: tuple[Term, ...]
    output: Term
    shapes: tuple[Shape, ...]
    size_dict: Mapping[Label, int] = field(compare=False)
    broadcast_terms: tuple[Term, ...] | None = field(default=None, compare=False, repr=False)

    @property
    def explicit(self) -> str:
        """The normalised equation in explicit form, e.g. ``'ab,bc->ac'``."""
        return ",".join(self.terms) + "->" + self.output

    @property
    def num_operands(self) -> int:
        """How many operands the equation takes."""
        return len(self.terms)

    def __repr__(self) -> str:
        return f"Equation({self.explicit!r})"

    def opt_einsum_view(self) -> Equation | None:
        """The equation as ``opt_einsum.contract_path`` sees it, where that differs.

        opt_einsum gives a label its size other than 1 (0 included), so a size-1 dimension
        that broadcasts counts at the full size; normalisation gives it a private label of
        size 1 instead (``broadcast_terms``). None when no dimension was relabelled.

        Example:
            >>> eq = parse_equation("ij,j->i", [(1, 3), (3,)])
            >>> eq.opt_einsum_view() is None
            True
            >>> view = parse_equation("ij,i->i", [(1, 3), (5,)]).opt_einsum_view()
            >>> view.explicit, dict(view.size_dict)
            ('ij,i->i', {'i': 5, 'j': 3})
        """
        if self.broadcast_terms is None:
            return None
        sizes: dict[Label, int] = {}
        for term, shape in zip(self.broadcast_terms, self.shapes, strict=True):
            for char, dim in zip(term, shape, strict=True):
                if sizes.get(char, 1) == 1:
                    sizes[char] = dim
        for char in self.output:
            sizes.setdefault(char, 1)
        used = {char: sizes[char] for char in dict.fromkeys("".join(self.broadcast_terms)
                                                             + self.output)}
        return Equation(text=self.text, terms=self.broadcast_terms, output=self.output,
                        shapes=self.shapes, size_dict=used)

    @classmethod
    def from_terms(
        cls, terms: Sequence[Term], output: Term, size_dict: Mapping[Label, int]
    ) -> Equation:
        """Build an already-normalised equation (a derived one) without parsing text.

        Example:
            >>> Equation.from_terms(["ab", "bc"], "ac", {"a": 2, "b": 3, "c": 4}).shapes
            ((2, 3), (3, 4))
        """
        shapes = tuple(tuple(size_dict[char] for char in term) for term in terms)
        used = {char: size_dict[char] for char in dict.fromkeys("".join(terms) + output)}
        text = ",".join(terms) + "->" + output
        return cls(text=text, terms=tuple(terms), output=output, shapes=shapes, size_dict=used)


def split_equation(text: str) -> tuple[list[str], str | None]:
    """Split equation text into raw input terms and the raw output (``None`` if implicit).

    ASCII whitespace is removed (a Unicode space is a label, as in opt_einsum); characters
    are checked; ``...`` is kept as written.

    Raises:
        EquationError: On a character einsum does not accept or a malformed arrow.
    """
    # ASCII whitespace only: opt_einsum's generated labels include U+1680, a Unicode space.
    compact = text.translate(_ASCII_SPACE)
    plain = not set(compact).difference(_PLAIN)
    # Each distinct character once, in order of first appearance: the first refused one
    # is the one at the lowest position (a network's equation repeats each label).
    for char in () if plain else dict.fromkeys(compact):
        if "\u2190" <= char <= "\u21ff":
            raise EquationError(
                f"character {char!r} at position {compact.index(char)} of the equation "
                "looks like an arrow; write '->'"
            )
        if char not in ",.->" and not _is_label(char):
            raise EquationError(
                f"unknown character {char!r} at position {compact.index(char)} of the "
                "equation; labels are letters or digits"
            )
    if compact.count("->") > 1:
        raise EquationError("the equation has more than one '->'")
    if "->" in compact:
        lhs, rhs = compact.split("->")
        output: str | None = rhs
    else:
        lhs, output = compact, None
    if "-" in lhs or ">" in lhs or (output is not None and ("-" in output or ">" in output)):
        raise EquationError("a '-' or '>' that is not part of '->' in the equation")
    if output is not None and "," in output:
        raise EquationError(f"the output {output!r} has a ',': the output is a single term")
    terms = lhs.split(",")
    for number, term in enumerate([*terms, *([output] if output is not None else [])]):
        stripped = term.replace(_ELLIPSIS, "", 1)
        if "." in stripped:
            where = f"operand {number}" if number < len(terms) else "the output"
            raise EquationError(
                f"{where} {term!r} has a '.' that is not part of a single '...'"
            )
    return terms, output


def _is_label(char: str) -> bool:
    """Whether ``char`` may be a label.

    ASCII letters and digits, as opt_einsum accepts them (``a0,0b->ab``), and any
    non-ASCII character (opt_einsum's generated symbols run through unassigned code
    points); ASCII punctuation is refused as a typo. A digit is a label like any other,
    also beside ``...``: the ellipsis is exactly three dots, and a ``.`` outside one is
    an error, so ``...0`` is the ellipsis then label ``0``.
    """
    return char.isalpha() or char in _DIGITS or not char.isascii()


def _fresh_labels(used: set[str]) -> Iterator[str]:
    """Yield labels not in ``used``: unused ASCII letters first, then other symbols."""
    for char in _ASCII_LABELS:
        if char not in used:
            used.add(char)
            yield char
    code = 0xC0  # Latin-1 letters onwards, as opt_einsum's symbols do beyond 52.
    while True:
        char = chr(code)
        code += 1
        if char not in used and char.isalpha():
            used.add(char)
            yield char


def _check_dims(shapes: Sequence[Sequence[int]]) -> tuple[Shape, ...]:
    checked = []
    for number, shape in enumerate(shapes):
        dims = []
        if not hasattr(shape, "__iter__"):
            raise ShapeError(
                f"shape {number} is {shape!r}; give a sequence of sizes such as (3,) or ()"
            )
        for axis, raw in enumerate(shape):
            try:
                if type(raw) is int:
                    dim = raw
                elif isinstance(raw, bool):
                    raise TypeError
                else:
                    dim = operator.index(raw)
            except TypeError:
                raise ShapeError(
                    f"operand {number} dimension {axis} has size {raw!r}; sizes are integers"
                ) from None
            if dim < 0:
                raise ShapeError(
                    f"operand {number} dimension {axis} has size {dim}; sizes must be "
                    "zero or more"
                )
            if dim > MAX_DIM:
                raise ShapeError(
                    f"operand {number} dimension {axis} has size {dim}, beyond the limit "
                    f"{MAX_DIM} (2**40)"
                )
            dims.append(int(dim))
        checked.append(tuple(dims))
    return tuple(checked)


def parse_equation(text: str, shapes: Sequence[Sequence[int]]) -> Equation:
    """Parse ``text`` against operand ``shapes`` and normalise it.

    Accepts what numpy.einsum and torch.einsum accept: explicit and implicit output,
    spaces, upper- and lower-case labels, ``...`` with broadcasting, repeated labels in
    one operand, labels private to one operand, scalar operands and outputs. Like
    opt_einsum, it also accepts non-ASCII characters as labels (opt_einsum's symbols
    beyond the 52 letters), so that large networks can be analysed; torch runs them step
    by step.

    Args:
        text: The equation, e.g. ``"ab,bc->ac"`` or ``"...ij,...jk"``.
        shapes: One shape per operand; ``()`` for a scalar.

    Returns:
        The normalised :class:`Equation`.

    Raises:
        EquationError: Malformed text, unknown or repeated output labels.
        ShapeError: Wrong number of shapes, rank mismatch, conflicting or bad sizes.

    Example:
        >>> parse_equation("ijj,k->ik", [(2, 3, 3), (4,)]).size_dict
        {'i': 2, 'j': 3, 'k': 4}
    """
    raw_terms, raw_output = split_equation(text)
    if len(raw_terms) != len(shapes):
        raise ShapeError(
            f"the equation has {len(raw_terms)} operand(s) but {len(shapes)} shape(s) were given"
        )
    dims = _check_dims(shapes)

    # Rank checks and the width of the ellipsis in each operand.
    ellipsis_rank = []
    for number, (term, shape) in enumerate(zip(raw_terms, dims, strict=True)):
        named = len(term.replace(_ELLIPSIS, ""))
        if _ELLIPSIS in term:
            if len(shape) < named:
                raise ShapeError(
                    f"operand {number} has subscripts {term!r} ({named} named indices and "
                    f"'...') but its shape {shape} has only {len(shape)} dimension(s)"
                )
            ellipsis_rank.append(len(shape) - named)
        else:
            if len(shape) != named:
                raise ShapeError(
                    f"operand {number} has subscripts {term!r} ({named} indices) but its "
                    f"shape {shape} has {len(shape)} dimension(s)"
                )
            ellipsis_rank.append(0)

    used = set("".join(raw_terms)) | set(raw_output or "")
    used.discard(".")
    fresh = _fresh_labels(used)
    width = max(ellipsis_rank, default=0)
    ellipsis_labels = "".join(next(fresh) for _ in range(width))

    # Expand '...' into explicit labels, right-aligned as numpy broadcasting does.
    terms = []
    for term, rank in zip(raw_terms, ellipsis_rank, strict=True):
        if _ELLIPSIS in term:
            expanded = ellipsis_labels[width - rank :] if rank else ""
            term = term.replace(_ELLIPSIS, expanded)
        terms.append(term)

    if raw_output is None:
        counts: dict[str, int] = {}
        for term in raw_terms:
            for char in term.replace(_ELLIPSIS, ""):
                counts[char] = counts.get(char, 0) + 1
        output = ellipsis_labels + "".join(sorted(c for c, n in counts.items() if n == 1))
    else:
        output = raw_output.replace(_ELLIPSIS, ellipsis_labels)
        input_labels = set("".join(terms))
        for char in raw_output.replace(_ELLIPSIS, ""):
            if char not in input_labels:
                raise EquationError(f"output index {char!r} does not appear in any operand")
            if raw_output.count(char) > 1:
                raise EquationError(f"output index {char!r} appears more than once")

    unified, size_dict = _unify_sizes(terms, dims, fresh)
    # Ellipsis labels that no operand kept at a size above 1 were relabelled away from
    # every operand; they still belong in the output with size 1.
    for char in output:
        size_dict.setdefault(char, 1)
    ordered = {char: size_dict[char] for char in dict.fromkeys("".join(unified) + output)}
    return Equation(
        text=text, terms=tuple(unified), output=output, shapes=dims, size_dict=ordered,
        broadcast_terms=None if unified == terms else tuple(terms),
    )


def _unify_sizes(
    terms: Sequence[str], dims: Sequence[Shape], fresh: Iterator[str]
) -> tuple[list[str], dict[str, int]]:
    """Give every label one size; relabel size-1 broadcast dimensions as private labels."""
    sizes: dict[str, int] = {}
    for number, (term, shape) in enumerate(zip(terms, dims, strict=True)):
        seen: dict[str, int] = {}
        for char, dim in zip(term, shape, strict=True):
            if char in seen and seen[char] != dim:
                raise ShapeError(
                    f"operand {number} repeats index {char!r} with sizes {seen[char]} and "
                    f"{dim}; a repeated index takes a diagonal and needs equal sizes"
                )
            seen[char] = dim
            known = sizes.get(char)
            if known is None or known == 1:
                sizes[char] = dim
            elif dim not in (1, known):
                raise ShapeError(
                    f"index {char!r} has size {known} in an earlier operand but {dim} in "
                    f"operand {number}"
                )

    relabelled = []
    size_dict = dict(sizes)
    for term, shape in zip(terms, dims, strict=True):
        if 1 not in shape:
            relabelled.append(term)
            continue
        private: dict[str, str] = {}
        new = []
        for char, dim in zip(term, shape, strict=True):
            if dim == 1 and sizes[char] != 1:
                if char not in private:
                    private[char] = next(fresh)
                    size_dict[private[char]] = 1
                new.append(private[char])
            else:
                new.append(char)
        relabelled.append("".join(new))
    return relabelled, size_dict


def shapes_from_sizes(text: str, sizes: Mapping[str, int]) -> tuple[Shape, ...]:
    """Derive operand shapes from the size of each index.

    Args:
        text: The equation (no ``...``: its width cannot follow from index sizes).
        sizes: Size of every label used by the operands, e.g. ``{"a": 2, "b": 3}``.

    Returns:
        One shape per operand.

    Raises:
        EquationError: The equation has ``...`` or is malformed.
        ShapeError: A label has no size, or a size names a label the equation lacks.

    Example:
        >>> shapes_from_sizes("ab,bc->ac", {"a": 2, "b": 3, "c": 4})
        ((2, 3), (3, 4))
    """
    terms, output = split_equation(text)
    if any(_ELLIPSIS in term for term in terms) or (output and _ELLIPSIS in output):
        raise EquationError("--sizes cannot give the width of '...'; give --shapes instead")
    labels = set("".join(terms)) | set(output or "")
    for char in sizes:
        if char not in labels:
            raise ShapeError(f"--sizes names index {char!r}, which the equation does not use")
    shapes = []
    for number, term in enumerate(terms):
        missing = [char for char in term if char not in sizes]
        if missing:
            raise ShapeError(f"--sizes gives no size for index {missing[0]!r} of operand {number}")
        shapes.append(tuple(sizes[char] for char in term))
    return tuple(shapes)
