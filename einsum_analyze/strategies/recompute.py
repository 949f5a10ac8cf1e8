"""``recompute``: reverse mode that remakes cheap intermediates in backward, in a better order.

Reverse mode (:mod:`.reverse`) keeps every intermediate a gradient step reads. A
compiler's partitioner keeps fewer: an intermediate made in one step from tensors that
are kept anyway (a broadcast outer product such as ``nlk,nji->nlkji`` above all) is
cheaper to make again in backward than to hold from forward to backward.

Recomputing alone does not lower the peak: at the step ``S`` that reads ``X``, the
gradient of ``X`` and ``X`` itself would be live together. So the step's gradients are
ordered around it. For a recomputed input ``X`` of ``S`` made by step ``P``:

1. the gradient of ``X`` (it reads ``S``'s other inputs, not ``X``), the upstream kept;
2. ``P``'s gradients at once, from that gradient, which is then freed; ``P``'s inputs
   stay live, as reverse mode keeps them for those gradients;
3. ``X`` made again from ``P``'s inputs (a ``contract`` event with ``recompute=True``
   under its forward name, as checkpointing's), which are then freed;
4. ``S``'s other gradients, which read ``X``; then ``X`` and the upstream are freed.

The rest of backward runs in reverse mode's order, ``P`` left out (done in step 2).

An intermediate may be recomputed (:func:`recompute_candidates`) when reverse mode keeps
it, its own gradient is wanted, and every intermediate input of ``P`` is kept for
backward (so one step remakes it, not a sub-tree) and not recomputed itself. The set is
chosen on the replay of the lowered schedule (:func:`choose_recompute`): greedily, the
candidate that lowers the training peak most, while one does, among the
:data:`MAX_CANDIDATES` largest of those made at no more than ``max_flops_per_element``
FLOPs per element of the result (option, default :data:`CHEAP`: an outer or elementwise
product, nothing summed, costs one). ``recompute`` (option) names a set instead, cheap
or not. Where no candidate lowers the peak, the schedule is
reverse mode's. The search (:mod:`einsum_analyze.search`) scores it on every path, so
the recommendation takes it where its lower peak comes at a small cost in time.
docs/method.md section 10.1 describes the method and its figures on ``mps-layer``.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

from ..errors import PlanningError
from ..model.deadline import past_deadline
from ..model.lowering import Layout, lower_events
from ..model.memory import input_elements, simulate_memory, tensor_name
from ..model.planning import Plan, Step, size_of
from ..model.schedule import Event, Kernel
from .checkpoint_schedule import read_in_backward
from .common import ScheduleBuilder, StrategyInput, needs_grad
from .registry import StrategySpec
from .reverse import _step_gradients, forward_and_seed

__all__ = [
    "CHEAP",
    "MAX_CANDIDATES",
    "SPEC",
    "build_recompute",
    "choose_recompute",
    "recompute_candidates",
    "recompute_events",
]

MAX_CANDIDATES = 8
"""Candidates the greedy choice weighs: the largest intermediates (each round replays
the schedule once per candidate left)."""

CHEAP = 2.0
"""FLOPs per element of its result at most, by default, for an intermediate to be remade
by the greedy choice: products that sum nothing (one FLOP per element, opt_einsum's
convention), as a compiler's partitioner remakes broadcasts and pointwise products. A
contraction that sums an index costs at least two per element of that index."""


def recompute_candidates(plan: Plan, grad: Collection[int]) -> tuple[int, ...]:
    """Intermediates one step remakes from tensors kept for backward, largest first.

    Example:
        >>> from einsum_analyze import parse_equation, Plan
        >>> plan = Plan.from_path(parse_equation("ni,nj,ij->n", [(8, 2), (8, 3), (2, 3)]),
        ...                       [(0, 1), (0, 1)])
        >>> recompute_candidates(plan, [0, 1, 2])  # the outer product nij (id 3)
        (3,)
    """
    num_ops = plan.equation.num_operands
    read = read_in_backward(plan, grad)
    needs = needs_grad(plan, frozenset(grad))
    producer = {step.output: step for step in plan.steps}
    found = [
        i for i in read
        if needs[i] and all(j < num_ops or j in read for j in producer[i].inputs)
    ]
    return tuple(sorted(found, key=lambda i: (-producer[i].output_elements, i)))


def _check(plan: Plan, grad: Collection[int], recompute: frozenset[int]) -> None:
    """Refuse a set that is not made of candidates, or that remakes a remade input."""
    allowed = set(recompute_candidates(plan, grad))
    producer = {step.output: step for step in plan.steps}
    for i in sorted(recompute):
        if i not in allowed:
            raise PlanningError(
                f"intermediate {i} cannot be recomputed; candidates: "
                f"{', '.join(map(str, sorted(allowed))) or 'none'}")
        clash = [j for j in producer[i].inputs if j in recompute]
        if clash:
            raise PlanningError(
                f"intermediate {i} is recomputed from {clash[0]}, which is recomputed too")
        beside = [j for j in _siblings(plan, i) if j in recompute]
        if beside:
            raise PlanningError(
                f"intermediates {i} and {beside[0]} are read by one step; one of them "
                f"may be recomputed")


def _siblings(plan: Plan, i: int) -> tuple[int, ...]:
    """The other inputs of the step that reads ``i``."""
    step = next(s for s in plan.steps if i in s.inputs)
    return tuple(j for j in step.inputs if j != i)


def _compatible(plan: Plan, i: int, chosen: frozenset[int]) -> bool:
    """Whether ``i`` may join ``chosen`` (see :func:`_check`)."""
    producer = {step.output: step for step in plan.steps}
    return not (any(j in chosen for j in producer[i].inputs)
                or any(i in producer[k].inputs for k in chosen)
                or any(j in chosen for j in _siblings(plan, i)))


def recompute_events(
    plan: Plan, grad: Collection[int], recompute: Iterable[int], *, depth_first: bool = False
) -> ScheduleBuilder:
    """Reverse mode that remakes ``recompute`` in backward, in the order of the module.

    ``depth_first``: in step 2, each gradient of an input of ``P`` made by a step with no
    remade input is taken down that step's sub-tree at once (its gradients, and so on
    below), while ``X``'s gradient is still live, instead of in reverse mode's order
    later: the small gradients below an outer product are made and freed one by one.

    Example:
        >>> from einsum_analyze import parse_equation, Plan
        >>> plan = Plan.from_path(parse_equation("ni,nj,ij->n", [(8, 2), (8, 3), (2, 3)]),
        ...                       [(0, 1), (0, 1)])
        >>> events = recompute_events(plan, [0, 1, 2], [3]).events
        >>> [(e.tensor, e.phase) for e in events if e.recompute]
        [('x3', 'backward')]
    """
    wanted = frozenset(grad)
    remade = frozenset(recompute) if wanted else frozenset()
    _check(plan, wanted, remade)
    num_ops = plan.equation.num_operands
    needs = needs_grad(plan, wanted)
    retain = read_in_backward(plan, wanted) - remade
    producer = {step.output: step for step in plan.steps}
    builder = forward_and_seed(plan, retain, bool(wanted))
    if not wanted:
        return builder
    done: set[int] = set()

    def free_kept(inputs: Iterable[int], terms: Iterable[str]) -> None:
        for i, term in zip(inputs, terms, strict=True):
            if i >= num_ops and (i in retain or i in remade):
                builder.free(tensor_name(i, num_ops), term)

    def settle(step: Step) -> None:
        """``step``'s gradients one by one, each taken down its own sub-tree at once."""
        order = sorted((p for p, i in enumerate(step.inputs) if needs[i]),
                       key=lambda p: size_of(step.input_terms[p], plan.equation.size_dict))
        for pos in order:
            _step_gradients(builder, step, needs, num_ops, positions=(pos,),
                            release=pos == order[-1])
            below = producer.get(step.inputs[pos])
            if below is not None and not any(i in remade for i in below.inputs):
                settle(below)
                free_kept(below.inputs, below.input_terms)
                done.add(below.output)

    for step in reversed(plan.steps):
        if step.output in done:
            continue
        if not needs[step.output]:
            free_kept(step.inputs, step.input_terms)
            continue
        pos = next((p for p, i in enumerate(step.inputs) if i in remade), None)
        if pos is None:
            _step_gradients(builder, step, needs, num_ops)
            free_kept(step.inputs, step.input_terms)
            continue
        x = step.inputs[pos]
        made = producer[x]
        _step_gradients(builder, step, needs, num_ops, positions=(pos,), release=False)
        others = [p for p in range(len(step.inputs)) if p != pos]
        # An input of S that no gradient left to make reads (the other input of a
        # pairwise step: its gradient reads X) goes now, before P's gradients.
        early = [q for q in others
                 if not any(needs[step.inputs[p]] for p in others if p != q)]
        free_kept([step.inputs[q] for q in early], [step.input_terms[q] for q in early])
        if depth_first:
            settle(made)
        else:
            _step_gradients(builder, made, needs, num_ops)
        done.add(x)
        builder.events.append(Event(
            kind="alloc", tensor=tensor_name(x, num_ops), elements=made.output_elements,
            phase="backward", op="contract",
            inputs=tuple(tensor_name(i, num_ops) for i in made.inputs),
            equation=made.equation, flops=made.flops, recompute=True,
        ))
        free_kept(made.inputs, made.input_terms)
        _step_gradients(builder, step, needs, num_ops, positions=others)
        late = [q for q in range(len(step.inputs)) if q not in early]
        free_kept([step.inputs[q] for q in late], [step.input_terms[q] for q in late])
    return builder


def _peak(plan: Plan, grad: frozenset[int], recompute: frozenset[int], itemsize: int,
          upstream_copy: bool, cache: dict[tuple[tuple[Layout, ...], str], Kernel],
          depth_first: bool = False) -> int:
    """Training peak of the lowered schedule, as build_strategy replays it."""
    equation = plan.equation
    built = recompute_events(plan, grad, recompute, depth_first=depth_first)
    events = lower_events(built.events, equation.terms, equation.size_dict, cache=cache)
    return simulate_memory(
        events, input_elements=input_elements(plan),
        output_elements=plan.steps[-1].output_elements, itemsize=itemsize,
        upstream_copy=upstream_copy,
    ).peak_bytes


def choose_recompute(
    plan: Plan, grad: Collection[int], itemsize: int, *, max_flops_per_element: float = CHEAP,
    upstream_copy: bool = False,
) -> frozenset[int]:
    """The greedy set of the module (empty where no cheap candidate lowers the peak)."""
    wanted = frozenset(grad)
    producer = {step.output: step for step in plan.steps}
    cache: dict[tuple[tuple[Layout, ...], str], Kernel] = {}
    chosen: frozenset[int] = frozenset()
    left = [i for i in recompute_candidates(plan, wanted)
            if producer[i].flops <= max_flops_per_element * producer[i].output_elements
            ][:MAX_CANDIDATES]
    if not left:
        return chosen
    best = _peak(plan, wanted, chosen, itemsize, upstream_copy, cache)
    # Each round replays the schedule once per candidate: the search's deadline
    # (model/deadline.py) stops adding more, keeping what was chosen so far.
    while left and not past_deadline():
        trials = []
        for i in left:
            if not _compatible(plan, i, chosen):
                continue
            trial = chosen | {i}
            trials.append((_peak(plan, wanted, trial, itemsize, upstream_copy, cache),
                           producer[i].flops, i))
        if not trials or min(trials)[0] >= best:
            break
        best, _, pick = min(trials)
        chosen = chosen | {pick}
        left.remove(pick)
    return chosen


def build_recompute(given: StrategyInput) -> ScheduleBuilder:
    """The ``recompute`` strategy's builder."""
    plan, grad = given.plan, given.grad
    named = given.options.get("recompute")
    if named is not None:
        chosen = frozenset(int(i) for i in named)
    else:
        cheap = float(given.options.get("max_flops_per_element", CHEAP))
        chosen = choose_recompute(plan, grad, given.itemsize, max_flops_per_element=cheap,
                                     upstream_copy=given.upstream_copy)
    depth_first = given.options.get("depth_first")
    if depth_first is None:  # the order of the lower peak; reverse mode's on a tie
        cache: dict[tuple[tuple[Layout, ...], str], Kernel] = {}
        depth_first = bool(chosen) and _peak(
            plan, frozenset(grad), chosen, given.itemsize, given.upstream_copy, cache,
            depth_first=True) < _peak(plan, frozenset(grad), chosen, given.itemsize,
                                      given.upstream_copy, cache)
    builder = recompute_events(plan, grad, chosen, depth_first=bool(depth_first))
    producer = {step.output: step for step in plan.steps}
    details: dict[str, Any] = {
        "recomputed": sorted(chosen),
        "recompute_flops": sum(producer[i].flops for i in chosen),
        "depth_first": bool(depth_first),
    }
    builder.details["recompute"] = details
    return builder


SPEC = StrategySpec(
    name="recompute",
    build=build_recompute,
    description="reverse mode that remakes cheap one-step intermediates (outer products) "
    "in backward instead of keeping them, ordering each step's gradients around them",
    default=False,
    searched=True,
    options={"recompute": None, "max_flops_per_element": CHEAP, "depth_first": None},
)
