"""Autograd's backward of torch.einsum, as a schedule (see :mod:`.forward`).

The engine runs the newest node first: the pairwise steps in reverse, then the views and
diagonals that aligned the operands. Before a ``bmm``'s backward the incoming gradient is
reshaped to the product's layout (a copy when the layouts disagree); ``MulBackward0``
makes both products at the joint shape before autograd sums each to its input's shape;
each repeated label is one ``DiagonalBackward0``. The caller holds the upstream gradient
throughout. No torch import here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Literal, NamedTuple

from ..model.equation import Equation
from ..model.schedule import Event, Operation
from .layout import AlignedTensor, packed_nests

__all__ = [
    "EVENT_FIELDS",
    "NEW_EVENT",
    "PairBackward",
    "PairSide",
    "StepKind",
    "append_backward",
    "count_flops",
    "diagonal_steps",
    "term_of",
]

NEW_EVENT = tuple.__new__
"""Builds an :class:`Event` from a tuple of all its fields, in :data:`EVENT_FIELDS`'
order (no call of its ``__new__``: the model builds one per tensor made or freed)."""

EVENT_FIELDS = ("kind", "tensor", "elements", "phase", "op", "inputs", "equation", "view",
                "consumes", "flops", "kernel", "workspace", "recompute", "ranges")
assert Event._fields == EVENT_FIELDS

StepKind = Literal["bmm", "mul", "sum"]


class PairSide(NamedTuple):
    """One input of a pairwise step, for its backward.

    Named tuples, this and :class:`PairBackward`, rather than frozen dataclasses: the
    model builds three per step, and a tuple is built several times faster.
    """

    tensor: AlignedTensor  # after its private sum: what the gradient is computed for
    fed: AlignedTensor  # what the product read (a copy, when the reshape copied)
    leaf: int  # the operand it comes from, -1 for an intermediate
    gradient_memory: tuple[int, ...]  # layout of its gradient, outermost first


class PairBackward(NamedTuple):
    """What the backward of one pairwise step needs."""

    kind: StepKind
    result: AlignedTensor
    groups: tuple[tuple[int, ...], ...]  # bmm: (batch, rows, columns) dims of the result
    sides: tuple[PairSide, PairSide]
    kept: tuple[str, ...]
    joint: int  # elements of the step's joint index space


def term_of(sizes: Mapping[int, int], order: Sequence[str]) -> str:
    """The labels of the dims above 1, in torch's order."""
    return "".join(map(order.__getitem__, sorted(sizes)))


def count_flops(joint: int, summed: bool, terms: int) -> int:
    """opt_einsum's convention: the joint space, once more when something is summed."""
    return joint * (max(1, terms - 1) + (1 if summed else 0))


def append_backward(
    eq: Equation,
    order: Sequence[str],
    diagonal: Sequence[bool],
    backs: Sequence[PairBackward],
    final: str,
    kept: Mapping[str, int],
    wanted: frozenset[int],
    events: list[Event],
) -> tuple[int, dict[int, int], int]:
    """Append autograd's backward: products, layout copies, diagonal embeddings.

    The engine runs the newest node first, so pairwise steps go in reverse. The views
    and diagonals that aligned the operands are the oldest nodes: they run last.

    Returns:
        Backward FLOPs, those of each operand's gradient products, and the shared rest.
    """
    operand_flops = {k: 0 for k in sorted(wanted)}
    if not wanted:
        return 0, operand_flops, 0
    out_elements = math.prod(eq.size_dict[c] for c in eq.output)
    seed = f"g{final}"
    total = shared = 0

    def alloc(name: str, elements: int, op: Operation, inputs: tuple[str, ...],
              equation: str, flops: int = 0, consumes: tuple[tuple[str, int], ...] = (),
              workspace: tuple[int, ...] = ()) -> None:
        events.append(NEW_EVENT(Event, ("alloc", name, elements, "backward", op, inputs,
                                        equation, "", consumes, flops, None, workspace,
                                        False, ())))

    def free(name: str, elements: int) -> None:
        events.append(NEW_EVENT(Event, ("free", name, elements, "backward", "", (), "", "", (),
                                        0, None, (), False, ())))

    embeds: list[tuple[int, str, str, int]] = []
    taken: set[str] = set()  # storages a gradient took over as a view

    def to_leaf(leaf: int, name: str, term: str, elements: int) -> None:
        if diagonal[leaf]:  # DiagonalBackward: zeros, then the diagonal filled, at the end
            embeds.append((leaf, name, term, elements))
        else:  # sums, permutes and unsqueezes give the gradient back as a view
            alloc(f"d{leaf}", elements, "view", (name,), f"{term}->{eq.terms[leaf]}",
                  consumes=((name, elements),))
            taken.add(name)

    alloc(seed, out_elements, "seed", (), f"->{eq.output}")
    if not backs:
        to_leaf(0, seed, eq.output, out_elements)
    pending: dict[str, tuple[str, str, int, tuple[int, ...]]] = {}
    if backs:
        memory = tuple(d for d in range(len(eq.output)) if d in backs[-1].result.sizes)
        pending[backs[-1].result.storage] = (seed, eq.output, out_elements, memory)
    for number in range(len(backs) - 1, -1, -1):
        back = backs[number]
        if back.result.storage not in pending:
            continue
        g_name, g_term, g_elements, g_memory = pending.pop(back.result.storage)
        sizes = back.result.sizes
        if back.kind == "bmm" and not packed_nests(sizes, g_memory, back.groups):
            # ViewBackward: the incoming gradient reshaped to the product's layout copies.
            alloc(f"gc{number}", g_elements, "contract", (g_name,), f"{g_term}->{g_term}")
            if g_name != seed:
                free(g_name, g_elements)
            g_name = f"gc{number}"
        made: list[tuple[int, str, str, int]] = []
        summed: list[tuple[str, str, str, int, int]] = []
        for position, side in enumerate(back.sides):
            if not side.tensor.needs_grad:
                continue
            other = back.sides[1 - position].fed
            term = term_of(side.tensor.sizes, order)
            elements = math.prod(side.tensor.sizes.values())
            name = f"g{number}{'ab'[position]}"
            if back.kind == "mul" and back.joint != elements:
                # MulBackward0 makes both products at the joint shape; autograd then
                # sums each to its input's shape.
                product = f"gp{number}{'ab'[position]}"
                joint_term = term_of(back.result.sizes, order)
                alloc(product, back.joint, "contract", (g_name, other.storage),
                      f"{g_term},{other.term}->{joint_term}", back.joint)
                summed.append((product, joint_term, name, elements, position))
                flops = 2 * back.joint
            else:
                flops = count_flops(back.joint, back.joint != elements, 2)
                alloc(name, elements, "contract", (g_name, other.storage),
                      f"{g_term},{other.term}->{term}", flops)
            total += flops
            if side.leaf >= 0:
                operand_flops[side.leaf] += flops
            else:
                shared += flops
                memory = side.gradient_memory
                if back.kind == "mul":
                    # The product follows the incoming gradient's layout; a sum to the
                    # input's shape is contiguous.
                    memory = (tuple(d for d in g_memory if d in side.tensor.sizes)
                              if back.joint == elements else tuple(sorted(side.tensor.sizes)))
                pending[side.tensor.storage] = (name, term, elements, memory)
            made.append((side.leaf, name, term, elements))
        for product, joint_term, name, elements, position in summed:
            term = term_of(back.sides[position].tensor.sizes, order)
            alloc(name, elements, "contract", (product,), f"{joint_term}->{term}", back.joint)
            free(product, back.joint)
        if g_name != seed:  # the caller holds the upstream gradient throughout
            free(g_name, g_elements)
        for storage in back.kept:
            free(storage, kept[storage])
        for leaf, name, term, elements in made:
            if leaf >= 0:
                to_leaf(leaf, name, term, elements)
    for leaf, name, term, elements in sorted(embeds, reverse=True):
        # One DiagonalBackward per repeated label, newest first: each makes zeros of the
        # shape before its diagonal. All but the last are temporaries.
        alloc(f"d{leaf}", math.prod(eq.shapes[leaf]), "unreduce", (name,),
              f"{term}->{eq.terms[leaf]}", workspace=diagonal_steps(eq, leaf)[:0:-1])
        if name != seed:
            free(name, elements)
    if seed not in taken:  # the caller lets go of the upstream gradient after backward
        free(seed, out_elements)
    return total, operand_flops, shared


def diagonal_steps(eq: Equation, operand: int) -> tuple[int, ...]:
    """Elements of the operand before each diagonal torch takes of it, in order.

    Before the diagonal at position ``p`` the tensor holds the first occurrence of each
    label seen so far and every dim from ``p`` on.

    Example:
        >>> from einsum_analyze.model.equation import parse_equation
        >>> diagonal_steps(parse_equation("ijji->", [(2, 3, 3, 2)]), 0)
        (36, 12)
    """
    term, shape = eq.terms[operand], eq.shapes[operand]
    seen: set[str] = set()
    kept = 1
    before = []
    for p, label in enumerate(term):
        if label in seen:
            before.append(kept * math.prod(shape[p:]))
        else:
            seen.add(label)
            kept *= shape[p]
    return tuple(before)


