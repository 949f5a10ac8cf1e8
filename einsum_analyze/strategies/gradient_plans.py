"""Every operand's gradient core planned as its own einsum (docs/method.md section 4).

Strategies that differentiate each operand on its own (``independent``) register with
``needs_gradient_plans=True``; :func:`einsum_analyze.analyze` then plans the cores once,
here, under the same memory limit as the forward path, and puts them in the report.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from ..equation import Equation
from ..gradients import GradientSpec, derive_gradients
from ..planning import check_memory_limit, plan_contraction
from .common import GradientPlan
from .rerooted import RerootedTree

__all__ = [
    "LARGE_NETWORK",
    "SEARCHING_OPTIMIZERS",
    "SEARCH_LIMIT",
    "plan_gradients",
]

LARGE_NETWORK = 64
"""Above this many operands the independent strategy follows the re-rooted forward tree."""

SEARCHING_OPTIMIZERS = frozenset({"optimal", "dp", "dynamic-programming", "branch-all",
                                  "auto-hq"})
"""Optimizers whose search time grows steeply: planning one core per operand with them
can take minutes (``dp`` on each of the 18 cores of ``tn18-b512``: about 4 s each)."""

SEARCH_LIMIT = 8
"""Above this many operands, the independent strategy does not search once per operand
with one of :data:`SEARCHING_OPTIMIZERS`: its cores follow the re-rooted forward tree."""


def plan_gradients(
    equation: Equation,
    operands: Sequence[int],
    optimize: str = "auto",
    forward: Plan | None = None,
    memory_limit: int | None = None,
) -> GradientPlan:
    """Derive and plan the core contraction of every operand in ``operands``.

    Each core is planned with ``optimize``, except where that would search too long:
    above :data:`LARGE_NETWORK` operands, or above :data:`SEARCH_LIMIT` operands with a
    searching optimizer (:data:`SEARCHING_OPTIMIZERS`), each core follows the forward
    tree re-rooted at its operand (``"forward-tree"``: no search, one pass per operand;
    ``greedy`` when no forward plan is given).

    ``memory_limit`` bounds every core's intermediates as it bounds the forward path's
    (:func:`einsum_analyze.planning.plan_contraction`): a core whose path breaks it is
    replanned with greedy under the limit, and the warnings say so.
    """
    start = time.perf_counter()
    specs = derive_gradients(equation, operands)
    n = equation.num_operands
    searching = n > SEARCH_LIMIT and optimize in SEARCHING_OPTIMIZERS
    warnings: list[str] = []
    rerooted = forward is not None and (n > LARGE_NETWORK or searching)
    optimizer = "forward-tree" if rerooted else "greedy" if searching else optimize
    if optimizer != optimize:
        reason = (
            f"the network has over {LARGE_NETWORK} operands"
            if n > LARGE_NETWORK
            else f"{optimize!r} searches too long to run once per operand above "
            f"{SEARCH_LIMIT} operands"
        )
        how = ("follows the forward tree re-rooted at each operand" if rerooted
               else "plans with greedy")
        warnings.append(
            f"the independent strategy {how} for its {len(specs)} gradient contractions "
            f"instead of planning each with {optimize!r}: {reason}"
        )
    if forward is not None and rerooted:
        tree = RerootedTree(forward)
        plans = []
        for spec in specs:
            plan = tree.core_plan(spec, optimizer)
            if memory_limit is not None:
                plan = check_memory_limit(plan, memory_limit, note_output=False,
                                          subject=f"operand {spec.operand}'s gradient")
            plans.append(plan)
    else:
        plans = [
            plan_contraction(spec.core(equation), optimizer, memory_limit, note_output=False,
                             subject=f"operand {spec.operand}'s gradient")
            for spec in specs
        ]
    warnings.extend(_limit_warnings(specs, plans, memory_limit))
    return GradientPlan(
        operands=tuple(operands),
        specs=specs,
        plans=tuple(plans),
        optimizer=optimizer,
        planning_s=time.perf_counter() - start,
        warnings=tuple(warnings),
    )


def _limit_warnings(
    specs: Sequence[GradientSpec], plans: Sequence[Plan], memory_limit: int | None
) -> list[str]:
    """The first core's memory-limit warnings in full, the others' in one line."""
    warned = [(spec.operand, plan) for spec, plan in zip(specs, plans, strict=True)
              if plan.warnings]
    if not warned or memory_limit is None:
        return []
    out = list(warned[0][1].warnings)
    rest = warned[1:]
    met = [k for k, plan in rest if _largest(plan) <= memory_limit]
    broke = [k for k, plan in rest if _largest(plan) > memory_limit]
    if met:
        out.append(
            f"the gradient contractions of operands {_listed(met)} also broke the memory "
            f"limit of {memory_limit:,} elements and were replanned under it"
        )
    if broke:
        out.append(
            f"no path found keeps the gradient contractions of operands {_listed(broke)} "
            f"under the memory limit of {memory_limit:,} elements"
        )
    return out


def _largest(plan: Plan) -> int:
    """Largest intermediate of a plan (its output aside; 0 when it has none)."""
    return max((step.output_elements for step in plan.steps[:-1]), default=0)


def _listed(operands: Sequence[int]) -> str:
    return ", ".join(str(k) for k in operands)
