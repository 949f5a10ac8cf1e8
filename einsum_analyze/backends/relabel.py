"""Equations torch.einsum can read: relabelling, and contraction of any equation.

torch.einsum reads the 52 ASCII letters only. :func:`contract_along_path` follows an
opt_einsum path step by step: a step with at most 52 distinct labels goes to
torch.einsum relabelled with ASCII letters; a wider step is contracted directly
(diagonals, sums of private labels, one ``bmm``), with no einsum at all. Used by the
float64 oracle and by the torch baselines when the equation is too wide for them.

torch and opt_einsum are imported inside the functions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

__all__ = ["TORCH_LABELS", "ascii_equation", "contract_along_path", "contract_step",
           "torch_equation", "torch_readable", "widest_step"]

TORCH_LABELS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
"""The only labels torch.einsum reads."""

_KEPT = frozenset(",->. ")
"""Characters of an equation that are not labels."""


def ascii_equation(equation: str) -> str:
    r"""Relabel an equation with ASCII letters, which torch.einsum requires.

    Labels get the letters in order of first appearance; commas, the arrow, spaces and
    the dots of ``...`` are kept.

    Raises:
        ValueError: More than 52 distinct labels.

    Example:
        >>> ascii_equation("\u00e0b,b->\u00e0")
        'ab,b->a'
        >>> ascii_equation("a0,0b->ab")
        'ab,bc->ac'
    """
    mapping: dict[str, str] = {}
    out = []
    for char in equation:
        if char in _KEPT:
            out.append(char)
            continue
        if char not in mapping:
            if len(mapping) == len(TORCH_LABELS):
                raise ValueError(f"{equation!r} uses more than 52 distinct labels in one step")
            mapping[char] = TORCH_LABELS[len(mapping)]
        out.append(mapping[char])
    return "".join(out)


def torch_readable(text: str) -> bool:
    """Whether torch.einsum reads ``text`` as it is: every label an ASCII letter.

    Example:
        >>> torch_readable("ab,bc->ac"), torch_readable("a0,0b->ab")
        (True, False)
    """
    return all(char in TORCH_LABELS or char in _KEPT for char in text)


def torch_equation(text: str, explicit: str) -> str | None:
    r"""The equation to hand torch.einsum, or None when no single call can take it.

    The one relabelling of the oracle and the torch baselines. ``text`` (as typed)
    when every label is an ASCII letter. Otherwise the labels (digits, non-ASCII
    symbols) are relabelled with ASCII letters in order of first appearance: ``text``
    when it names its output (``...`` and spaces kept), else ``explicit``, whose output
    is the normalised one (torch would sort relabelled labels into another order).
    None with more than 52 distinct labels.

    Example:
        >>> greek = "αβ,βγ->αγ"
        >>> torch_equation(greek, greek)
        'ab,bc->ac'
        >>> torch_equation("...0, 0 -> ...", "bc0,0->bc")
        '...a, a -> ...'
        >>> torch_equation("b0,0a", "b0,0a->ab")
        'ab,bc->ca'
    """
    if torch_readable(text):
        return text
    try:
        return ascii_equation(text if "->" in text else explicit)
    except ValueError:
        return None


def _steps(explicit: str, shapes: Sequence[Sequence[int]],
           path: Sequence[Sequence[int]] | None) -> list[tuple[tuple[int, ...], str]]:
    import opt_einsum

    optimize: Any = [tuple(step) for step in path] if path is not None else "auto"
    _, info = opt_einsum.contract_path(explicit, *[tuple(s) for s in shapes], shapes=True,
                                       optimize=optimize)
    return [(tuple(entry[0]), entry[2]) for entry in info.contraction_list]


def widest_step(explicit: str, shapes: Sequence[Sequence[int]],
                path: Sequence[Sequence[int]] | None = None) -> int:
    """The most distinct labels of one step along ``path`` (opt_einsum's ``auto``: None).

    Example:
        >>> widest_step("ab,bc,cd->ad", [(2, 3), (3, 4), (4, 5)])
        3
    """
    return max((len(set(eq) - set(",->")) for _, eq in _steps(explicit, shapes, path)),
               default=0)


def contract_along_path(explicit: str, tensors: Sequence[Any],
                        path: Sequence[Sequence[int]] | None = None) -> Any:
    """``explicit`` contracted pairwise along ``path`` (opt_einsum's ``auto``: None).

    Differentiable: torch.autograd goes through it.
    """
    import torch

    operands = list(tensors)
    steps = _steps(explicit, [tuple(t.shape) for t in tensors], path)
    if not steps:  # one operand, nothing to contract: opt_einsum lists no step
        return torch.einsum(ascii_equation(explicit), *operands)
    for positions, equation in steps:
        picked = [operands.pop(position) for position in positions]
        operands.append(_step(equation, picked))
    (result,) = operands
    return result


def _step(equation: str, tensors: Sequence[Any]) -> Any:
    import torch

    if len(set(equation) - set(",->")) <= len(TORCH_LABELS):
        return torch.einsum(ascii_equation(equation), *tensors)
    return contract_step(equation, tensors)


def contract_step(equation: str, tensors: Sequence[Any]) -> Any:
    """One step of one or two tensors, any number of labels, without einsum.

    Diagonals of repeated labels, sums of the labels no one else needs, then one
    ``bmm`` (two tensors) and a permutation to the output's order.
    """
    import torch

    lhs, _, out = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) == 1:
        tensor, term = _prepare(tensors[0], terms[0], set(out))
        return tensor.permute([term.index(c) for c in out])
    if len(terms) != 2:
        raise ValueError(f"{equation!r}: a step contracts one or two tensors")
    a, b = terms
    left_t, a = _prepare(tensors[0], a, set(b) | set(out))
    right_t, b = _prepare(tensors[1], b, set(a) | set(out))
    size = dict(zip(a, left_t.shape, strict=True)) | dict(zip(b, right_t.shape, strict=True))
    batch = [c for c in a if c in b and c in out]
    summed = [c for c in a if c in b and c not in out]
    left = [c for c in a if c not in b]
    right = [c for c in b if c not in a]

    def count(labels: Sequence[str]) -> int:
        return math.prod(size[c] for c in labels)

    lhs_m = left_t.permute([a.index(c) for c in batch + left + summed]).reshape(
        count(batch), count(left), count(summed))
    rhs_m = right_t.permute([b.index(c) for c in batch + summed + right]).reshape(
        count(batch), count(summed), count(right))
    order = batch + left + right
    result = torch.bmm(lhs_m, rhs_m).reshape([size[c] for c in order])
    return result.permute([order.index(c) for c in out])


def _prepare(tensor: Any, term: str, keep: set[str]) -> tuple[Any, str]:
    """Take the diagonal of repeated labels and sum the labels not in ``keep``."""
    distinct = "".join(dict.fromkeys(term))
    if len(distinct) < len(term):
        sizes = [tensor.shape[term.index(c)] for c in distinct]
        strides = [sum(tensor.stride(p) for p, x in enumerate(term) if x == c)
                   for c in distinct]
        tensor = tensor.as_strided(sizes, strides, tensor.storage_offset())
    dropped = [p for p, c in enumerate(distinct) if c not in keep]
    if dropped:
        tensor = tensor.sum(dim=dropped)
    return tensor, "".join(c for c in distinct if c in keep)
