"""Plan a contraction path with opt_einsum: its optimizers, a memory limit, a deadline.

Planners see labels and sizes, never arrays. The path found is described step by step
by :mod:`.plan` (its records are importable from here as before); a step of three or
more tensors, which opt_einsum's optimizers end with under a memory limit, runs pairwise
and the plan's warnings say what that costs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from ..errors import PlanningError
from .deadline import SearchTimeout, alarm
from .equation import Equation
from .memo import deterministic_path
from .parsing import parse_memory_limit  # moved to parsing; importable here as before
from .plan import (
    Plan,
    Step,
    count_flops,
    describe_path,
    largest_intermediate,
    run_pairwise,
    size_of,
    whose_path,
)
from .units import format_seconds

__all__ = [
    "DEFAULT_MAX_SEARCH_S",
    "OPTIMIZERS",
    "TIME_LIMIT_NOTE",
    "Plan",
    "SearchCallback",
    "Step",
    "count_flops",
    "check_memory_limit",
    "parse_memory_limit",
    "plan_contraction",
    "run_pairwise",
    "search_notice",
    "size_of",
]


OPTIMIZERS: tuple[str, ...] = (
    "auto",
    "auto-hq",
    "branch-1",
    "branch-2",
    "branch-all",
    "dp",
    "dynamic-programming",
    "eager",
    "greedy",
    "opportunistic",
    "optimal",
    "random-greedy",
    "random-greedy-128",
)
"""opt_einsum's optimizer names (checked against the installed opt_einsum in the tests)."""

DEFAULT_MAX_SEARCH_S = 1.0
"""Seconds a path search may take before the planner stops it (``--max-search-time``); the
training search as a whole, its sliced fallback included, ends within the same."""

_EXPONENTIAL = {
    "optimal": 8,
    "branch-all": 10,
    "branch-2": 14,
    "dp": 16,
    "dynamic-programming": 16,
}
"""Searches whose time grows exponentially with the operands, and the number of operands
above which they are announced before they start (``optimal`` on 9 operands takes about a
second; ``dp`` depends on the network's connectivity)."""

_GREEDY_FAMILY = frozenset({"greedy", "eager", "opportunistic", "auto"})
"""Optimizers that never search long (``auto`` picks a bounded search for up to 14
operands and greedy above): no deadline is set for them."""

TIME_LIMIT_NOTE = "(--max-search-time)"
"""Marks the warnings of a search stopped at its time limit."""

SearchCallback = Callable[[str], None]
"""Called with a one-line notice before a search that may take long starts."""


def plan_contraction(
    equation: Equation,
    optimize: str | Sequence[Sequence[int]] = "auto",
    memory_limit: int | None = None,
    *,
    subject: str = "the forward pass",
    note_output: bool = True,
    max_search_s: float | None = DEFAULT_MAX_SEARCH_S,
    on_search: SearchCallback | None = None,
    deadline: float | None = None,
) -> Plan:
    """Choose a forward path with opt_einsum and describe every step.

    A memory limit is a guarantee, as far as any path can keep it: the limit bounds
    every intermediate a step builds, not the inputs and not the final output (as in
    opt_einsum, where ``memory_limit`` is "the largest intermediate tensor contract will
    build"). opt_einsum's ``random-greedy``, ``dp`` and ``auto-hq`` may return a path over
    the limit, or fail; such a path is replaced (:func:`check_memory_limit`) and the
    plan's ``warnings`` say so.

    Args:
        equation: The normalised equation.
        optimize: An opt_einsum optimizer name, or an explicit linear path.
        memory_limit: Largest intermediate allowed, in elements (opt_einsum's meaning).
        subject: What is planned, for the warnings (``"operand 3's gradient"``).
        note_output: Warn when the final output alone is over the limit.
        max_search_s: Seconds the search may take (None: no limit). A search still
            running then stops: ``branch-*`` keeps the best path it had found, the
            others fall back to greedy, and the plan's warnings say so. The limit
            holds in the main thread, where a timer signal can stop the search.
        on_search: Called with a notice, before it starts, when the search may take
            long (:func:`search_notice`).
        deadline: A ``time.monotonic()`` time the search must end by, shared by
            several searches (the gradient cores); overrides ``max_search_s``.

    Returns:
        The :class:`Plan`.

    Raises:
        PlanningError: Unknown optimizer or an invalid explicit path.

    Example:
        >>> from einsum_analyze import parse_equation
        >>> eq = parse_equation("ab,bc,cd->ad", [(2, 3), (3, 4), (4, 5)])
        >>> plan_contraction(eq, "optimal").flops
        128
    """
    if not isinstance(optimize, str):
        plan = describe_path(equation, optimize, "explicit")
    else:
        name = optimize.lower()
        if name not in OPTIMIZERS:
            raise PlanningError(
                f"unknown optimizer {optimize!r}; choose one of: {', '.join(OPTIMIZERS)}"
            )
        if deadline is None and max_search_s is not None:
            deadline = time.monotonic() + max_search_s
        try:
            found, used, note = _search_path(equation, name, memory_limit, deadline=deadline,
                                             on_search=on_search, subject=subject)
            plan = describe_path(equation, found, used)
            if note:
                plan = replace(plan, warnings=(note.format(flops=plan.flops),))
        except PlanningError as err:
            if memory_limit is None or name == "greedy":
                raise
            # dp raises when no path it searches meets the limit: greedy always finds one.
            greedy = describe_path(equation, _find_path(equation, "greedy", memory_limit),
                                 "greedy")
            plan = replace(greedy, warnings=(
                f"{name} found no path for {subject} under the memory limit of "
                f"{memory_limit:,} elements ({err.__cause__ or err}); planned with greedy "
                f"under the limit",
            ))
    if memory_limit is not None:
        plan = check_memory_limit(plan, memory_limit, subject=subject,
                                  note_output=note_output)
    view = equation.opt_einsum_view()
    if view is not None:
        plan = replace(plan, opt_einsum_flops=_opt_einsum_flops(view, optimize, memory_limit,
                                                                deadline))
    return run_pairwise(plan, memory_limit, subject=subject)


def _opt_einsum_flops(view: Equation, optimize: str | Sequence[Sequence[int]],
                      memory_limit: int | None, deadline: float | None) -> int | None:
    """``opt_cost`` of opt_einsum's own plan of ``view`` (None: it finds no path)."""
    if not isinstance(optimize, str):
        return describe_path(view, optimize, "explicit").flops
    try:
        found, used, _ = _search_path(view, optimize.lower(), memory_limit,
                                      deadline=deadline, on_search=None,
                                      subject="the forward pass")
    except PlanningError:
        return None
    return describe_path(view, found, used).flops


def check_memory_limit(
    plan: Plan, memory_limit: int, *, subject: str = "the forward pass",
    note_output: bool = True,
) -> Plan:
    """Keep a plan to a memory limit on its intermediates, or say why it cannot be kept.

    A plan none of whose intermediates (every step's output but the last) is over the
    limit is returned as it is. Otherwise the path is replanned with opt_einsum's greedy
    under the limit (which contracts all remaining tensors at once where no pair fits,
    so it always meets the limit) and a warning names the figure that broke it. If the
    replanned path still breaks it, the path with the smaller largest intermediate is
    kept and the warning says that no path met the limit. A final output over the limit
    is noted too: no path can make it smaller.

    Args:
        plan: The plan to check.
        memory_limit: Largest intermediate allowed, in elements.
        subject: What is planned, for the warnings.
        note_output: Warn when the final output alone is over the limit.

    Returns:
        A plan that meets the limit, or the best found, with warnings.

    Example:
        >>> from einsum_analyze import parse_equation
        >>> eq = parse_equation("ea,ac,ce->", [(32, 32)] * 3)
        >>> plan = check_memory_limit(Plan.from_path(eq, [(0, 1), (0, 1)]), 64)
        >>> plan.optimizer, plan.as_planned.path, plan.path
        ('greedy', ((0, 1, 2),), ((0, 1), (0, 1)))
    """
    warnings = list(plan.warnings)
    plan = replace(plan.as_planned, warnings=plan.warnings, opt_einsum_flops=plan.opt_einsum_flops)
    over = largest_intermediate(plan)
    if over is not None and over.output_elements > memory_limit:
        who = whose_path(plan)
        broke = (
            f"{who} for {subject} builds an intermediate of {over.output_elements:,} "
            f"elements (step {over.index}, {over.equation}), over the memory limit of "
            f"{memory_limit:,} elements"
        )
        greedy = describe_path(
            plan.equation, _find_path(plan.equation, "greedy", memory_limit), "greedy"
        )
        again = largest_intermediate(greedy)
        if again is None or again.output_elements <= memory_limit:
            warnings.append(
                f"{broke}; replanned with greedy under the limit ({plan.flops:,} -> "
                f"{greedy.flops:,} FLOPs)"
            )
            plan = greedy
        else:
            if again.output_elements < over.output_elements:
                plan = greedy
            warnings.append(
                f"{broke}; no path found meets the limit: greedy's largest intermediate "
                f"has {again.output_elements:,} elements; the report uses "
                f"{plan.optimizer}'s path, over the limit"
            )
    output = plan.steps[-1].output_elements
    if note_output and output > memory_limit:
        warnings.append(
            f"the output of {subject} has {output:,} elements, over the memory limit of "
            f"{memory_limit:,} elements: no path makes it smaller (the limit bounds "
            f"intermediates only, as in opt_einsum)"
        )
    return run_pairwise(replace(plan, warnings=tuple(warnings)), memory_limit, subject=subject)


def search_notice(equation: Equation, name: str, subject: str = "the forward pass") -> str | None:
    """A notice for a search whose time grows exponentially with the operands; else None.

    Example:
        >>> from einsum_analyze import parse_equation
        >>> eq = parse_equation(",".join(["ab"] * 9), [(2, 3)] * 9)
        >>> search_notice(eq, "optimal")[:60]
        "searching the forward pass's path with 'optimal' over 9 oper"
    """
    above = _EXPONENTIAL.get(name)
    if above is None or equation.num_operands <= above:
        return None
    return (
        f"searching {subject}'s path with {name!r} over {equation.num_operands} operands "
        f"and {len(equation.size_dict)} indices: the search grows exponentially with the "
        "operands and may take long"
    )


def _search_path(
    equation: Equation,
    name: str,
    memory_limit: int | None,
    *,
    deadline: float | None,
    on_search: SearchCallback | None,
    subject: str,
) -> tuple[list[tuple[int, ...]], str, str | None]:
    """opt_einsum's path, searched under a deadline.

    Returns the path, the optimizer whose path it is, and a warning template if the
    search stopped (with a ``{flops}`` field for the path's FLOPs).
    """
    if equation.num_operands <= 2 or name in _GREEDY_FAMILY:
        return _find_path(equation, name, memory_limit), name, None
    notice = search_notice(equation, name, subject)
    if notice is not None and on_search is not None:
        on_search(notice)
    from opt_einsum import paths

    nbranch = {"branch-1": 1, "branch-2": 2, "branch-all": None}
    optimizer = paths.BranchBound(nbranch=nbranch[name]) if name in nbranch else None
    start = time.monotonic()
    if deadline is not None and start >= deadline:
        found: list[tuple[int, ...]] | None = None
    else:
        try:
            with alarm(deadline):
                found = _find_path(equation, name, memory_limit, optimizer)
            return found, name, None
        except SearchTimeout:
            found = None
            best = optimizer.best.get("ssa_path") if optimizer is not None else None
            if best is not None:
                found = [tuple(int(i) for i in step) for step in paths.ssa_to_linear(best)]
    spent = time.monotonic() - start
    what = (f"{name} stopped searching {subject}'s path after {format_seconds(spent)}, at the time "
            f"limit {TIME_LIMIT_NOTE}")
    if found is not None:
        return found, name, (f"{what}; the report uses the best path it had found "
                             "({flops:,} FLOPs)")
    greedy = _find_path(equation, "greedy", memory_limit)
    return greedy, "greedy", (f"{what}, before finding a path; the report uses greedy's "
                              "path ({flops:,} FLOPs)")


def _find_path(
    equation: Equation, name: str, memory_limit: int | None,
    optimizer: Callable[..., Sequence[Sequence[int]]] | None = None,
) -> list[tuple[int, ...]]:
    """opt_einsum's path for ``equation`` with optimizer ``name``."""
    num_ops = equation.num_operands
    if num_ops <= 2:
        return [tuple(range(num_ops))]
    from opt_einsum import paths

    input_sets = [frozenset(term) for term in equation.terms]
    try:
        if optimizer is None:
            known = deterministic_path(equation, name, memory_limit)
            if known is not None:
                return known
        search: Callable[..., Sequence[Sequence[int]]] = (
            optimizer if optimizer is not None else paths.get_path_fn(name)
        )
        found = search(
            input_sets, frozenset(equation.output), dict(equation.size_dict), memory_limit
        )
    except (ValueError, KeyError, RuntimeError, OverflowError) as err:
        # OverflowError: random-greedy's costs are floats; a huge network's are not.
        raise PlanningError(f"optimizer {name!r} failed: {err}") from err
    return [tuple(int(i) for i in step) for step in found]


