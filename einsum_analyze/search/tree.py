"""Contraction trees improved for the training step: subtree reconfiguration.

A pairwise contraction tree is scored node by node. A node that contracts the tensors
of leaf sets ``A`` and ``B`` into ``C`` costs, in opt_einsum's FLOP convention, its
forward step plus, for each child that leads to an operand needing a gradient, the
reverse-mode gradient contraction ``dC, other -> child`` (the same joint index space;
see :mod:`einsum_analyze.strategies.reverse`). Summed over the nodes this is the
training FLOPs of reverse mode, the ``flops`` objective's figure on that tree.

:func:`reconfigure` improves a tree the way cotengra's subtree reconfiguration does:
for every node, the sub-tree down to ``width`` pieces is replaced by the best tree over
those pieces, found exactly by a dynamic program over subsets (outer products
included), and passes repeat while they gain and time is left. The cost is additive over
nodes, so the program is exact for the pieces. Intermediates over a memory limit are
never built. Labels and sizes only: nothing is allocated.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

from ..model.equation import Equation

__all__ = ["NodeCost", "TreeModel", "linear_to_tree", "reconfigure", "tree_to_linear"]

Tree: TypeAlias = "int | tuple[Tree, Tree]"
"""A leaf (operand position) or a pair of sub-trees."""

NodeCost = Literal["training-flops", "retained"]
"""What a node costs: reverse mode's training FLOPs, or a memory proxy (bytes written
plus bytes retained for backward)."""


@dataclass(slots=True)
class TreeModel:
    """Labels, sizes and gradient needs of one equation, cached by leaf set (bit mask).

    Attributes:
        equation: The equation.
        grad_mask: Bit mask of the operands that need a gradient.
        memory_limit: Largest intermediate allowed, in elements (None: none).
        kind: The node cost.
    """

    equation: Equation
    grad_mask: int
    memory_limit: int | None = None
    kind: NodeCost = "training-flops"
    _holders: dict[str, int] = field(default_factory=dict)
    _leaf: list[frozenset[str]] = field(default_factory=list)
    _terms: dict[int, frozenset[str]] = field(default_factory=dict)
    _pairs: dict[tuple[int, int], float] = field(default_factory=dict)
    _full: int = 0

    def __post_init__(self) -> None:
        eq = self.equation
        self._full = (1 << eq.num_operands) - 1
        for k, term in enumerate(eq.terms):
            self._leaf.append(frozenset(term))
            for char in set(term):
                self._holders[char] = self._holders.get(char, 0) | (1 << k)
        output = frozenset(eq.output)
        for char in output:
            # The output holds its labels: a pseudo-operand outside every leaf set.
            self._holders[char] = self._holders.get(char, 0) | (1 << eq.num_operands)
        self._terms[self._full] = output

    def term(self, mask: int) -> frozenset[str]:
        """Labels of the tensor that contracts the leaves of ``mask``."""
        found = self._terms.get(mask)
        if found is not None:
            return found
        if mask & (mask - 1) == 0:
            found = self._leaf[mask.bit_length() - 1]
        else:
            labels: set[str] = set()
            for k in _bits(mask):
                labels |= self._leaf[k]
            found = frozenset(c for c in labels if self._holders[c] & ~mask)
        self._terms[mask] = found
        return found

    def elements(self, labels: frozenset[str]) -> int:
        """Elements of a tensor with these (distinct) labels."""
        sizes = self.equation.size_dict
        return math.prod([sizes[c] for c in labels])

    def fits(self, mask: int) -> bool:
        """Whether the tensor of ``mask`` may be built under the memory limit."""
        if self.memory_limit is None or mask == self._full or mask & (mask - 1) == 0:
            return True
        return self.elements(self.term(mask)) <= self.memory_limit

    def cost(self, a: int, b: int) -> float:
        """Cost of the node contracting leaf sets ``a`` and ``b``."""
        key = (a, b) if a < b else (b, a)
        found = self._pairs.get(key)
        if found is not None:
            return found
        ta, tb, tc = self.term(a), self.term(b), self.term(a | b)
        joint = ta | tb
        size = self.elements(joint)
        if self.kind == "training-flops":
            total = size * (2 if joint - tc else 1)
            if a & self.grad_mask:
                total += size * (2 if joint - ta else 1)
            if b & self.grad_mask:
                total += size * (2 if joint - tb else 1)
        else:
            total = self.elements(tc)
            if b & self.grad_mask and a & (a - 1):
                total += self.elements(ta)
            if a & self.grad_mask and b & (b - 1):
                total += self.elements(tb)
        value = float(total)
        self._pairs[key] = value
        return value

    def tree_cost(self, tree: Tree) -> float:
        """Cost of a whole tree."""
        if isinstance(tree, int):
            return 0.0
        left, right = tree
        return (self.tree_cost(left) + self.tree_cost(right)
                + self.cost(_mask(left), _mask(right)))

    def tree_fits(self, tree: Tree) -> bool:
        """Whether no intermediate of the tree is over the memory limit."""
        if isinstance(tree, int):
            return True
        return self.fits(_mask(tree)) and all(self.tree_fits(t) for t in tree)


def _bits(mask: int) -> list[int]:
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


def _mask(tree: Tree) -> int:
    if isinstance(tree, int):
        return 1 << tree
    return _mask(tree[0]) | _mask(tree[1])


def linear_to_tree(path: Sequence[Sequence[int]], num_operands: int) -> Tree | None:
    """An opt_einsum linear path as a tree; None where a step is not pairwise."""
    if num_operands == 1:
        return 0
    live: list[Tree] = list(range(num_operands))
    for step in path:
        if len(step) != 2:
            return None
        i, j = sorted(step, reverse=True)
        a, b = live.pop(i), live.pop(j)
        live.append((b, a))
    return live[0] if len(live) == 1 else None


def tree_to_linear(tree: Tree, num_operands: int) -> tuple[tuple[int, ...], ...]:
    """A tree as an opt_einsum linear path (children contracted before parents)."""
    order: list[tuple[int, int]] = []

    def visit(node: Tree) -> int:
        if isinstance(node, int):
            return 1 << node
        a, b = visit(node[0]), visit(node[1])
        order.append((a, b))
        return a | b

    visit(tree)
    live = [1 << k for k in range(num_operands)]
    path = []
    for a, b in order:
        i, j = live.index(a), live.index(b)
        path.append((min(i, j), max(i, j)))
        for p in sorted((i, j), reverse=True):
            live.pop(p)
        live.append(a | b)
    return tuple(path)


def _best_over(pieces: Sequence[Tree], model: TreeModel) -> tuple[float, Tree] | None:
    """The cheapest tree over ``pieces`` (exact, outer products included)."""
    masks = [_mask(p) for p in pieces]
    n = len(pieces)
    best: dict[int, tuple[float, Tree]] = {}
    for i, piece in enumerate(pieces):
        best[1 << i] = (model.tree_cost(piece), piece)
    for subset in range(1, 1 << n):
        if subset & (subset - 1) == 0:
            continue
        low = subset & -subset
        rest = subset ^ low
        union = 0
        for i in _bits(subset):
            union |= masks[i]
        if not model.fits(union):
            continue
        found: tuple[float, Tree] | None = None
        sub = rest
        # Every split with the lowest piece on the left side, each split once.
        while True:
            left = low | (rest ^ sub)
            right = sub
            if right and left in best and right in best:
                lm = 0
                for i in _bits(left):
                    lm |= masks[i]
                cost = best[left][0] + best[right][0] + model.cost(lm, union ^ lm)
                if found is None or cost < found[0]:
                    found = (cost, (best[left][1], best[right][1]))
            if sub == 0:
                break
            sub = (sub - 1) & rest
        if found is not None:
            best[subset] = found
    return best.get((1 << n) - 1)


def _frontier(node: Tree, width: int) -> list[Tree]:
    """Open the sub-tree of ``node`` into at most ``width`` pieces, largest first."""
    pieces: list[Tree] = [node]
    while len(pieces) < width:
        inner = [p for p in pieces if not isinstance(p, int)]
        if not inner:
            break
        widest = max(inner, key=lambda p: bin(_mask(p)).count("1"))
        pieces.remove(widest)
        assert not isinstance(widest, int)
        pieces.extend(widest)
    return pieces


def reconfigure(
    tree: Tree,
    model: TreeModel,
    *,
    width: int = 7,
    deadline: float | None = None,
    max_passes: int = 8,
) -> Tree:
    """Improve a tree by exact re-contraction of its sub-trees (see the module).

    Args:
        tree: The starting tree.
        model: Its equation's model, with the node cost.
        width: Pieces per sub-tree (the program costs about ``3**width`` steps).
        deadline: ``time.perf_counter()`` value after which no new pass starts.
        max_passes: Passes at most.

    Returns:
        A tree that costs no more than ``tree`` (and meets the limit if ``tree`` did).
    """
    current = tree
    cost = model.tree_cost(current)
    for _ in range(max_passes):
        improved = False

        def rebuild(node: Tree) -> Tree:
            nonlocal improved
            if isinstance(node, int):
                return node
            node = (rebuild(node[0]), rebuild(node[1]))
            if deadline is not None and time.perf_counter() > deadline:
                return node
            pieces = _frontier(node, width)
            if len(pieces) < 3:
                return node
            found = _best_over(pieces, model)
            if found is None:
                return node
            before = model.tree_cost(node)
            if found[0] < before * (1 - 1e-12):
                improved = True
                return found[1]
            return node

        current = rebuild(current)
        new_cost = model.tree_cost(current)
        if not improved or new_cost >= cost or (
            deadline is not None and time.perf_counter() > deadline
        ):
            cost = min(cost, new_cost)
            break
        cost = new_cost
    return current


def optimise_path(
    path: Sequence[Sequence[int]],
    model: TreeModel,
    *,
    width: int = 7,
    deadline: float | None = None,
) -> tuple[tuple[int, ...], ...] | None:
    """:func:`reconfigure` on a linear path; None where the path is not pairwise."""
    n = model.equation.num_operands
    tree = linear_to_tree(path, n)
    if tree is None or isinstance(tree, int):
        return None
    better = reconfigure(tree, model, width=width, deadline=deadline)
    return tree_to_linear(better, n)


