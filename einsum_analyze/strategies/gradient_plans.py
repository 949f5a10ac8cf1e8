"""Every operand's gradient core planned as its own einsum (docs/method.md section 4).

Strategies that differentiate each operand on its own (``independent``) register with
``needs_gradient_plans=True``; :func:`einsum_analyze.analyze` then plans the cores once,
here, under the same memory limit as the forward path, and puts them in the report.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from ..model.equation import Equation
from ..model.gradients import GradientSpec, derive_gradients
from ..model.planning import (
    DEFAULT_MAX_SEARCH_S,
    TIME_LIMIT_NOTE,
    Plan,
    SearchCallback,
    check_memory_limit,
    plan_contraction,
    search_notice,
)
from ..model.units import format_seconds
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
    *,
    max_search_s: float | None = DEFAULT_MAX_SEARCH_S,
    on_search: SearchCallback | None = None,
) -> GradientPlan:
    """Derive and plan the core contraction of every operand in ``operands``.

    Each core is planned with ``optimize``, except where that would search too long:
    above :data:`LARGE_NETWORK` operands, or above :data:`SEARCH_LIMIT` operands with a
    searching optimizer (:data:`SEARCHING_OPTIMIZERS`), each core follows the forward
    tree re-rooted at its operand (``"forward-tree"``: no search, one pass per operand;
    ``greedy`` when no forward plan is given).

    ``memory_limit`` bounds every core's intermediates as it bounds the forward path's
    (:func:`einsum_analyze.model.planning.plan_contraction`): a core whose path breaks it is
    replanned with greedy under the limit, and the warnings say so.

    ``max_search_s`` bounds the searches of all the cores together (one deadline,
    :func:`~einsum_analyze.model.planning.plan_contraction`); ``on_search`` is told once, before
    they start, when each may take long.
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
        deadline = None if max_search_s is None else time.monotonic() + max_search_s
        cores = [spec.core(equation) for spec in specs]
        notice = search_notice(cores[0], optimizer, "each gradient contraction") if cores else None
        if notice is not None and on_search is not None:
            on_search(f"{notice} ({len(cores)} searches)")
        plans = [
            plan_contraction(core, optimizer, memory_limit, note_output=False,
                             subject=f"operand {spec.operand}'s gradient", deadline=deadline)
            for spec, core in zip(specs, cores, strict=True)
        ]
    warnings.extend(_limit_warnings(specs, plans, memory_limit))
    stopped = [spec.operand for spec, plan in zip(specs, plans, strict=True)
               if any(TIME_LIMIT_NOTE in w for w in plan.warnings)]
    if stopped:
        assert max_search_s is not None  # a search stops at its limit only when it has one
        warnings.append(
            f"the path searches of the gradient contractions of operands {_listed(stopped)} "
            f"stopped at the time limit of {format_seconds(max_search_s)} {TIME_LIMIT_NOTE}: "
            f"each uses "
            f"the best path {optimize!r} had found, or greedy's"
        )
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
    warned = [(spec.operand, [w for w in plan.warnings if TIME_LIMIT_NOTE not in w])
              for spec, plan in zip(specs, plans, strict=True)]
    warned = [(k, listed) for k, listed in warned if listed]
    if not warned or memory_limit is None:
        return []
    by_operand = dict(zip((spec.operand for spec in specs), plans, strict=True))
    out = list(warned[0][1])
    rest = [k for k, _ in warned[1:]]
    met = [k for k in rest if _largest(by_operand[k]) <= memory_limit]
    broke = [k for k in rest if _largest(by_operand[k]) > memory_limit]
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
    split = [k for k in rest if by_operand[k].wide is not None]
    if split:
        out.append(
            f"the gradient contractions of operands {_listed(split)} also contract three or "
            f"more tensors at once and run pairwise"
        )
    return out


def _largest(plan: Plan) -> int:
    """Largest intermediate of a path as planned (its output aside; 0 when it has none)."""
    return max((step.output_elements for step in plan.as_planned.steps[:-1]), default=0)


def _listed(operands: Sequence[int]) -> str:
    return ", ".join(str(k) for k in operands)
