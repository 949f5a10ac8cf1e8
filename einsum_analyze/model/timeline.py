"""What the pictures need, in the report's JSON: memory timelines and the contraction tree.

Pure data from the model (no torch, no matplotlib): a strategy's replay as compact lists
(live bytes after each event, the high point of each event, the index where backward
starts, the peak event), the forward tree as parent links with sizes, and what a
strategy does with each intermediate (its *fate*). :mod:`einsum_analyze.plots` draws
them from the JSON alone, so a saved report draws as the analysis did.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, get_args

from .planning import Plan
from .schedule import Event

__all__ = ["FATES", "Fate", "forward_tree", "strategy_fates", "strategy_timeline"]

Fate = Literal["input", "retained", "recomputed", "freed", "output"]
"""What happens to a node of the forward tree: an operand (``input``), an intermediate
kept after forward for backward (``retained``), one freed in forward and made again in
backward (``recomputed``, checkpoint), one freed in forward for good (``freed``), or the
forward result (``output``)."""

FATES: tuple[Fate, ...] = get_args(Fate)


def strategy_timeline(events: Sequence[Event], live_bytes: Sequence[int],
                      high_bytes: Sequence[int], peak_event: int) -> dict[str, Any]:
    """A strategy's memory replay as the report's ``timeline`` entry.

    Args:
        events: The strategy's schedule, forward then backward.
        live_bytes: Live total after each event, inputs included.
        high_bytes: Live total at the high point of each event, inputs included.
        peak_event: Index of the event of the peak (-1: the inputs alone).

    Returns:
        ``live_bytes`` and ``high_bytes`` (one integer per event), ``backward_start``
        (index of the first backward event; the number of events when none) and
        ``peak_event``.

    Example:
        >>> ev = [Event(kind="alloc", tensor="x2", elements=6, phase="forward")]
        >>> strategy_timeline(ev, [64], [64], 0)["backward_start"]
        1
    """
    start = next((i for i, event in enumerate(events) if event.phase == "backward"),
                 len(events))
    return {
        "live_bytes": list(live_bytes),
        "high_bytes": list(high_bytes),
        "backward_start": start,
        "peak_event": peak_event,
    }


def forward_tree(plan: Plan, itemsize: int) -> dict[str, Any]:
    """The forward contraction tree as parallel lists, indexed by single-use id.

    Operands are ids ``0..n-1``, intermediates follow in step order and the last id is
    the result. ``parent`` is -1 for the result (and for an operand no step reads).

    Example:
        ``ab,bc->ac`` with sizes 2, 3, 4 (float32) gives ``parent`` ``[2, 2, -1]``,
        ``bytes`` ``[24, 48, 32]``, ``terms`` ``["ab", "bc", "ac"]`` and ``summed``
        ``["", "", "b"]``.
    """
    eq = plan.equation
    num_ops = eq.num_operands
    total = num_ops + len(plan.steps)
    parent = [-1] * total
    sizes = [0] * total
    terms = [""] * total
    summed = [""] * total
    flops = [0] * total
    for k, term in enumerate(eq.terms):
        terms[k] = term
        elements = 1
        for char in term:
            elements *= eq.size_dict[char]
        sizes[k] = elements * itemsize
    for step in plan.steps:
        for i in step.inputs:
            parent[i] = step.output
        sizes[step.output] = step.output_elements * itemsize
        terms[step.output] = step.output_term
        summed[step.output] = step.summed
        flops[step.output] = step.flops
    return {"parent": parent, "bytes": sizes, "terms": terms, "summed": summed,
            "flops": flops}


def strategy_fates(plan: Plan, events: Sequence[Event]) -> list[Fate]:
    """What a strategy does with each node of :func:`forward_tree`, by single-use id."""
    num_ops = plan.equation.num_operands
    final = plan.steps[-1].output if plan.steps else num_ops - 1
    names = {f"x{step.output}": step.output for step in plan.steps}
    alive: set[int] = set()
    recomputed: set[int] = set()
    for event in events:
        node = names.get(event.tensor)
        if node is None:
            continue
        if event.phase == "forward":
            if event.kind == "alloc":
                alive.add(node)
            else:
                alive.discard(node)
        elif event.kind == "alloc" and event.recompute:
            recomputed.add(node)
    fates: list[Fate] = ["input"] * num_ops
    for step in plan.steps:
        node = step.output
        if node == final:
            fates.append("output")
        elif node in recomputed:
            fates.append("recomputed")
        elif node in alive:
            fates.append("retained")
        else:
            fates.append("freed")
    return fates
