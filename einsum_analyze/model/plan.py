"""A contraction path described step by step: the :class:`Plan` and its :class:`Step` records.

Plans see labels and sizes, never arrays. FLOPs follow opt_einsum's convention
(``helpers.flop_count``): the size of the joint index space of a step, times
``max(1, operands - 1)``, plus one more time that size when the step sums an index. A
path with a step of three or more tensors runs pairwise (:func:`run_pairwise`); the plan
keeps the path as planned beside it. :mod:`.planning` chooses paths with opt_einsum.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ..errors import PlanningError
from .equation import Equation
from .pairwise import is_pairwise, pairwise_path
from .types import Label, LinearPath, SizeDict, SsaPath, Term

__all__ = [
    "Plan",
    "Step",
    "count_flops",
    "describe_path",
    "largest_intermediate",
    "run_pairwise",
    "size_of",
    "whose_path",
]


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
            optimizer and limit; None otherwise (then it is ``as_planned.flops``).
        wide: Where the path as planned has a step of three or more tensors, that plan
            (its FLOPs and largest intermediate are opt_einsum's); this plan is then the
            pairwise path it runs (:func:`~einsum_analyze.model.pairwise.pairwise_path`),
            whose steps, FLOPs and intermediates are the ones every strategy, executor and
            memory replay sees. None when every step is pairwise.
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
    wide: Plan | None = None

    @property
    def as_planned(self) -> Plan:
        """The path as planned: :attr:`wide` where a wide step was split, else this plan."""
        return self if self.wide is None else self.wide

    @property
    def user_flops(self) -> int:
        """Forward FLOPs as opt_einsum reports them for the user's equation and path."""
        return self.as_planned.flops if self.opt_einsum_flops is None else self.opt_einsum_flops

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

        A step of three or more tensors runs as pairwise steps (:attr:`wide` keeps the
        path as given).

        Raises:
            PlanningError: The path does not contract every operand into one, or names a
                position that does not exist.
        """
        return run_pairwise(describe_path(equation, path, optimizer))


def run_pairwise(plan: Plan, memory_limit: int | None = None, *,
                 subject: str | None = None) -> Plan:
    """The plan that runs a path with steps of three or more tensors: pairwise.

    Such a step runs as opt_einsum's pairwise path over its tensors
    (:func:`~einsum_analyze.model.pairwise.pairwise_path`), each intermediate a step of
    its own; the result keeps the path as planned in :attr:`Plan.wide`. A plan already
    pairwise, or already split, is returned as it is.

    Args:
        plan: A plan, its steps as planned.
        memory_limit: The planner's limit in elements, for the note (None: none).
        subject: What is planned; given, a warning says what runs instead.

    Returns:
        A plan whose every step contracts at most two tensors.

    Example:
        >>> from einsum_analyze import parse_equation
        >>> eq = parse_equation("ab,bc,cd->ad", [(2, 30), (30, 4), (4, 50)])
        >>> run = run_pairwise(Plan.from_path(eq, [(0, 1, 2)]).as_planned)
        >>> run.path, run.flops, run.as_planned.flops
        (((0, 1), (0, 1)), 1280, 36000)
    """
    if plan.wide is not None or is_pairwise(plan.path):
        return plan
    run = describe_path(plan.equation, pairwise_path(plan.equation, plan.path), plan.optimizer)
    warnings = plan.warnings
    if subject is not None:
        warnings = (*warnings, _pairwise_note(plan, run, memory_limit, subject))
    return replace(run, warnings=warnings, opt_einsum_flops=plan.opt_einsum_flops,
                   wide=replace(plan, warnings=(), opt_einsum_flops=None))


def largest_intermediate(plan: Plan) -> Step | None:
    """The step building the largest intermediate (the final output aside); None if none."""
    inner = plan.steps[:-1]
    return max(inner, key=lambda step: step.output_elements) if inner else None


def whose_path(plan: Plan) -> str:
    """Whose path a plan is, for warnings: ``"greedy's path"``, ``"the given path"``."""
    return "the given path" if plan.optimizer == "explicit" else f"{plan.optimizer}'s path"


def _pairwise_note(planned: Plan, run: Plan, memory_limit: int | None, subject: str) -> str:
    """What runs instead of a path's steps of three or more tensors, with its figures."""
    wide = [step for step in planned.steps if len(step.inputs) > 2]
    said = "; ".join(
        f"{'its last step' if step is planned.steps[-1] else f'its step {step.index}'} "
        f"contracts {len(step.inputs)} tensors at once ({step.flops:,} FLOPs)"
        for step in wide
    )
    inner = largest_intermediate(run)
    largest = 0 if inner is None else inner.output_elements
    over = ("" if memory_limit is None or largest <= memory_limit
            else f", over the memory limit of {memory_limit:,} elements")
    return (
        f"{whose_path(planned)} for {subject}: {said}; run pairwise, as torch.einsum contracts "
        f"such a step: {run.flops:,} FLOPs in all ({planned.flops:,} as planned), largest "
        f"intermediate (the output aside) {largest:,} elements{over}"
    )


def describe_path(equation: Equation, path: Sequence[Sequence[int]], optimizer: str) -> Plan:
    """The plan of ``path`` as given, its steps of three or more tensors kept whole.

    What runs is :func:`run_pairwise` of it (:meth:`Plan.from_path` gives that). The path
    is walked once, keeping a count of live holders of each label.

    Raises:
        PlanningError: The path does not contract every operand into one, or names a
            position that does not exist.
    """
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
