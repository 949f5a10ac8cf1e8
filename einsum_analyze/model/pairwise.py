"""Steps of three or more tensors, split into pairwise steps.

opt_einsum's optimizers under a memory limit end with one step over every tensor left
when no pair of them fits, and a user may give such a path. torch.einsum contracts that
step pair by pair, along opt_einsum's path over the step's own tensors, and none of its
intermediates would be in our schedule. So a plan runs such a step as those pairwise
steps, with our own kernels: each intermediate is an event that the memory replay, the
time model and the timelines see. :func:`pairwise_path` makes that split;
:class:`~einsum_analyze.model.planning.Plan` keeps both the path as planned (its FLOPs
are opt_einsum's) and the pairwise path it runs.
"""

from __future__ import annotations

from collections.abc import Sequence

from .equation import Equation
from .types import LinearPath

__all__ = ["is_pairwise", "pairwise_path"]


def is_pairwise(path: Sequence[Sequence[int]]) -> bool:
    """Whether no step of ``path`` contracts more than two tensors.

    Example:
        >>> is_pairwise([(0, 1), (0, 1)]), is_pairwise([(0, 1, 2)])
        (True, False)
    """
    return all(len(step) <= 2 for step in path)


def pairwise_path(equation: Equation, path: Sequence[Sequence[int]]) -> LinearPath:
    """``path`` with each step of three or more tensors split into pairwise steps.

    The split follows opt_einsum's ``auto`` path over the step's tensors, with no memory
    limit (no pair of them met the limit that made the step), as torch.einsum would
    contract it. Steps of one or two tensors are kept as they are; a path without wide
    steps is returned unchanged. The last pairwise step of a split produces the wide
    step's result, so later steps keep their positions.

    Args:
        equation: The normalised equation.
        path: An opt_einsum linear path, valid for ``equation``.

    Returns:
        The linear path, every step of at most two positions.

    Example:
        >>> from einsum_analyze import parse_equation
        >>> eq = parse_equation("ab,bc,cd->ad", [(2, 30), (30, 4), (4, 50)])
        >>> pairwise_path(eq, [(0, 1, 2)])
        ((0, 1), (0, 1))
    """
    if is_pairwise(path):
        return tuple(tuple(int(p) for p in step) for step in path)
    from opt_einsum import paths

    sizes = dict(equation.size_dict)
    output = frozenset(equation.output)
    live: list[frozenset[str]] = [frozenset(t) for t in equation.terms]
    out: list[tuple[int, ...]] = []

    def contract(positions: Sequence[int]) -> None:
        chosen = [live[i] for i in positions]
        for i in sorted(positions, reverse=True):
            live.pop(i)
        live.append(frozenset().union(*chosen) & output.union(*live))

    for step in path:
        if len(step) <= 2:
            out.append(tuple(int(p) for p in step))
            contract(step)
            continue
        members = [live[i] for i in step]
        rest = [t for i, t in enumerate(live) if i not in step]
        target = output.union(*rest) & frozenset().union(*members)
        inner = paths.auto(members, target, sizes)
        # Where each of the step's tensors (and each pairwise result) sits in ``live``.
        where = [int(i) for i in step]
        for pair in inner:
            if len(pair) == 1:  # opt_einsum's path over one tensor: nothing to pair
                continue
            a, b = sorted(int(p) for p in pair)
            i, j = where[a], where[b]
            out.append((min(i, j), max(i, j)))
            contract((i, j))
            where = [k - (k > i) - (k > j) for n, k in enumerate(where) if n not in (a, b)]
            where.append(len(live) - 1)
    return tuple(out)
