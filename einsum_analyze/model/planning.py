"""Plan a contraction path with opt_einsum and describe it step by step.

Planners see labels and sizes, never arrays. FLOPs follow opt_einsum's convention
(``helpers.flop_count``): the size of the joint index space of a step, times
``max(1, operands - 1)``, plus one more time that size when the step sums an index.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from ..errors import PlanningError
from .deadline import SearchTimeout, alarm
from .equation import Equation
from .memo import deterministic_path
from .parsing import parse_memory_limit  # moved to parsing; importable here as before
from .types import Label, LinearPath, SizeDict, SsaPath, Term
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


def size_of(labels: str, size_dict: SizeDict) -> int:
    """Number of elements of a tensor with these labels, repeats counted (1 for a scalar)."""
    return math.prod(map(size_dict.__getitem__, labels))  # the loop in C: terms run long


def count_flops(contracted: str, has_sum: bool, num_terms: int, size_dict: SizeDict) -> int:
    """FLOPs of one contraction in opt_einsum's convention.

    Args:
        contracted: Every distinct label the step touches.
        has_sum: Whether the step sums at least one label away.
        num_terms: How many tensors the step consumes.
        size_dict: Size of every label.

    Returns:
        ``size * (max(1, num_terms - 1) + has_sum)`` where size is the joint index space.

    Example:
        >>> count_flops("abc", True, 2, {"a": 2, "b": 3, "c": 4})
        48
    """
    factor = max(1, num_terms - 1) + (1 if has_sum else 0)
    return size_of(contracted, size_dict) * factor


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    """One contraction of the plan.

    Attributes:
        index: Position of the step in the plan.
        operands: Positions in the current operand list, as in opt_einsum's linear path.
        inputs: Single-use ids of the tensors consumed (inputs are ``0..n-1``).
        output: Single-use id of the tensor produced.
        input_terms: Labels of each consumed tensor.
        output_term: Labels of the produced tensor.
        summed: Labels summed away by this step.
        flops: FLOPs of the step (opt_einsum convention).
        output_elements: Elements of the produced tensor.
    """

    index: int
    operands: tuple[int, ...]
    inputs: tuple[int, ...]
    output: int
    input_terms: tuple[Term, ...]
    output_term: Term
    summed: str
    flops: int
    output_elements: int

    @property
    def equation(self) -> str:
        """The step's own einsum, e.g. ``'ab,bc->ac'``."""
        return ",".join(self.input_terms) + "->" + self.output_term

    @property
    def scaling(self) -> int:
        """Number of distinct labels the step touches."""
        return len(set("".join(self.input_terms)))


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """A contraction path with per-step figures, built eagerly.

    Attributes:
        equation: The normalised equation.
        optimizer: Name of the optimizer that chose the path (``"explicit"`` if given).
        path: opt_einsum linear path.
        steps: The steps in execution order.
        flops: Total FLOPs, equal to opt_einsum's ``PathInfo.opt_cost`` for this path.
        naive_flops: FLOPs of a single all-at-once contraction (opt_einsum's naive cost).
        largest_intermediate_elements: Largest tensor a step produces (the output counts).
        warnings: What the user should know about how the path was chosen (a memory
            limit the optimizer broke, a fallback); ``analyze`` puts them in the report.
        opt_einsum_flops: Where normalisation relabelled size-1 broadcast dimensions
            (:meth:`~einsum_analyze.model.equation.Equation.opt_einsum_view`), the
            ``opt_cost`` opt_einsum reports for the user's equation with the same
            optimizer and limit; None otherwise (then it is ``flops``).
    """

    equation: Equation
    optimizer: str
    path: LinearPath
    steps: tuple[Step, ...]
    flops: int
    naive_flops: int
    largest_intermediate_elements: int
    warnings: tuple[str, ...] = ()
    opt_einsum_flops: int | None = None

    @property
    def user_flops(self) -> int:
        """Forward FLOPs as opt_einsum reports them for the user's equation."""
        return self.flops if self.opt_einsum_flops is None else self.opt_einsum_flops

    @property
    def ssa_path(self) -> SsaPath:
        """The path with single-use tensor ids."""
        return tuple(step.inputs for step in self.steps)

    @property
    def log10_speedup(self) -> float:
        """log10 of naive over planned FLOPs (finite however large the ratio)."""
        return math.log10(max(self.naive_flops, 1)) - math.log10(max(self.flops, 1))

    @property
    def speedup(self) -> float | None:
        """Naive over planned FLOPs; None when the ratio exceeds a float's range."""
        try:
            return self.naive_flops / max(self.flops, 1)
        except OverflowError:
            return None

    @property
    def output_id(self) -> int:
        """Single-use id of the final tensor."""
        return self.steps[-1].output

    def __repr__(self) -> str:
        return (
            f"Plan({self.equation.explicit!r}, optimizer={self.optimizer!r}, "
            f"steps={len(self.steps)}, flops={self.flops})"
        )

    @classmethod
    def from_path(
        cls, equation: Equation, path: Sequence[Sequence[int]], *, optimizer: str = "explicit"
    ) -> Plan:
        """Build a plan from an opt_einsum linear path.

        Raises:
            PlanningError: The path does not contract every operand into one, or names a
                position that does not exist.
        """
        return _build_plan(equation, path, optimizer)


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
        plan = _build_plan(equation, optimize, "explicit")
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
            plan = _build_plan(equation, found, used)
            if note:
                plan = replace(plan, warnings=(note.format(flops=plan.flops),))
        except PlanningError as err:
            if memory_limit is None or name == "greedy":
                raise
            # dp raises when no path it searches meets the limit: greedy always finds one.
            greedy = _build_plan(equation, _find_path(equation, "greedy", memory_limit),
                                 "greedy")
            plan = replace(greedy, warnings=(
                f"{name} found no path for {subject} under the memory limit of "
                f"{memory_limit:,} elements ({err.__cause__ or err}); planned with greedy "
                f"under the limit{_all_at_once(greedy)}",
            ))
    if memory_limit is not None:
        plan = check_memory_limit(plan, memory_limit, subject=subject,
                                  note_output=note_output)
    view = equation.opt_einsum_view()
    if view is None:
        return plan
    return replace(plan, opt_einsum_flops=_opt_einsum_flops(view, optimize, memory_limit,
                                                            deadline))


def _opt_einsum_flops(view: Equation, optimize: str | Sequence[Sequence[int]],
                      memory_limit: int | None, deadline: float | None) -> int | None:
    """``opt_cost`` of opt_einsum's own plan of ``view`` (None: it finds no path)."""
    if not isinstance(optimize, str):
        return _build_plan(view, optimize, "explicit").flops
    try:
        found, used, _ = _search_path(view, optimize.lower(), memory_limit,
                                      deadline=deadline, on_search=None,
                                      subject="the forward pass")
    except PlanningError:
        return None
    return _build_plan(view, found, used).flops


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
        >>> plan.optimizer, plan.path
        ('greedy', ((0, 1, 2),))
    """
    warnings = list(plan.warnings)
    over = _largest_intermediate(plan)
    if over is not None and over.output_elements > memory_limit:
        who = "the given path" if plan.optimizer == "explicit" else f"{plan.optimizer}'s path"
        broke = (
            f"{who} for {subject} builds an intermediate of {over.output_elements:,} "
            f"elements (step {over.index}, {over.equation}), over the memory limit of "
            f"{memory_limit:,} elements"
        )
        greedy = _build_plan(
            plan.equation, _find_path(plan.equation, "greedy", memory_limit), "greedy"
        )
        again = _largest_intermediate(greedy)
        if again is None or again.output_elements <= memory_limit:
            warnings.append(
                f"{broke}; replanned with greedy under the limit ({plan.flops:,} -> "
                f"{greedy.flops:,} FLOPs){_all_at_once(greedy)}"
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
    if tuple(warnings) == plan.warnings:
        return plan
    return replace(plan, warnings=tuple(warnings))


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


def _largest_intermediate(plan: Plan) -> Step | None:
    """The step building the largest intermediate (the final output aside); None if none."""
    inner = plan.steps[:-1]
    return max(inner, key=lambda step: step.output_elements) if inner else None


def _all_at_once(plan: Plan) -> str:
    """A note when a plan's last step contracts more than two tensors at once."""
    last = plan.steps[-1]
    if len(last.inputs) <= 2:
        return ""
    return (
        f"; its last step contracts {len(last.inputs)} tensors at once "
        f"({last.flops:,} FLOPs)"
    )


def _build_plan(equation: Equation, path: Sequence[Sequence[int]], optimizer: str) -> Plan:
    """Walk a linear path once, keeping a count of live holders of each label."""
    size_dict = equation.size_dict
    num_ops = equation.num_operands
    terms: list[Term] = list(equation.terms)
    ids: list[int] = list(range(num_ops))
    # How many live tensors (plus the output) hold each label: a label leaves a step's
    # result exactly when the step consumes all its holders and the output lacks it.
    holders: dict[Label, int] = {}
    for term in terms:
        for char in set(term):
            holders[char] = holders.get(char, 0) + 1
    for char in equation.output:
        holders[char] = holders.get(char, 0) + 1

    steps: list[Step] = []
    next_id = num_ops
    for index, raw in enumerate(path):
        if not all(isinstance(p, int) and not isinstance(p, bool) for p in raw):
            raise PlanningError(f"path step {index} {tuple(raw)} holds a non-integer position")
        positions = tuple(sorted(raw, reverse=True))
        if not positions or len(set(positions)) != len(positions):
            raise PlanningError(f"path step {index} {tuple(raw)} is empty or repeats a position")
        if positions[0] >= len(terms) or positions[-1] < 0:
            raise PlanningError(
                f"path step {index} {tuple(raw)} names a position outside 0..{len(terms) - 1}"
            )
        in_terms = tuple(terms.pop(p) for p in positions)
        in_ids = tuple(ids.pop(p) for p in positions)
        # Keys in order of first appearance in the step's inputs, as opt_einsum orders
        # an intermediate's labels.
        counts: dict[Label, int] = {}
        for term in in_terms:
            for char in dict.fromkeys(term):
                counts[char] = counts.get(char, 0) + 1
        is_last = index == len(path) - 1
        if is_last:
            if terms:
                raise PlanningError(
                    f"the path leaves {len(terms) + 1} tensors; it must contract to one"
                )
            out_term = equation.output
        else:
            out_term = "".join([char for char, n in counts.items() if holders[char] > n])
        summed = "".join([char for char in counts if char not in out_term])
        for char, n in counts.items():
            holders[char] -= n
        for char in out_term:
            holders[char] = holders.get(char, 0) + 1
        contracted = "".join(counts)
        steps.append(
            Step(
                index=index,
                operands=tuple(raw),
                inputs=in_ids,
                output=next_id,
                input_terms=in_terms,
                output_term=out_term,
                summed=summed,
                flops=count_flops(contracted, bool(summed), len(in_terms), size_dict),
                output_elements=size_of(out_term, size_dict),
            )
        )
        terms.append(out_term)
        ids.append(next_id)
        next_id += 1
    if not steps or terms != [equation.output]:
        raise PlanningError("the path does not contract every operand into one tensor")

    all_labels = "".join(dict.fromkeys("".join(equation.terms)))
    inner = sum(len(set(t)) for t in equation.terms) > len(all_labels)
    return Plan(
        equation=equation,
        optimizer=optimizer,
        path=tuple(tuple(int(p) for p in raw) for raw in path),
        steps=tuple(steps),
        flops=sum(step.flops for step in steps),
        naive_flops=count_flops(all_labels, inner, max(num_ops, 1), size_dict),
        largest_intermediate_elements=max(step.output_elements for step in steps),
    )
