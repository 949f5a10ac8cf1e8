"""``reverse``: reverse mode through the forward contraction tree (docs/method.md section 5).

The gradient of each step input is one contraction of the step's output gradient with
the step's other inputs; a step input is retained exactly when another input of the same
step needs a gradient. Backward FLOPs are about twice the forward FLOPs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from ..model.memory import forward_schedule, tensor_name
from ..model.planning import Plan, Step, size_of
from ..model.schedule import Event
from .common import ScheduleBuilder, StrategyInput, needs_grad, single_step_core
from .registry import StrategySpec

__all__ = ["SPEC", "build_reverse", "forward_and_seed", "reverse_events"]


def reverse_events(
    plan: Plan, grad: frozenset[int], also_retain: Iterable[int] = ()
) -> ScheduleBuilder:
    """Forward with retention, then reverse mode through the tree.

    Args:
        plan: The forward plan.
        grad: Operands that need a gradient.
        also_retain: Single-use ids of intermediates to keep after forward beyond those
            the gradients read (when any gradient is wanted); each is freed in backward
            once its step is done.
    """
    equation = plan.equation
    num_ops = equation.num_operands
    needs = needs_grad(plan, grad)
    retain = set(also_retain) if grad else set()
    for step in plan.steps:
        for i in step.inputs:
            if any(needs[j] for j in step.inputs if j != i):
                retain.add(i)
    builder = forward_and_seed(plan, retain, bool(grad))
    if not grad:
        return builder
    for step in reversed(plan.steps):
        if needs[step.output]:
            _step_gradients(builder, step, needs, num_ops)
        for i, term in zip(step.inputs, step.input_terms, strict=True):
            if i >= num_ops and i in retain:
                builder.free(tensor_name(i, num_ops), term)
    return builder


def forward_and_seed(plan: Plan, retain: Iterable[int], seed: bool) -> ScheduleBuilder:
    """A builder holding forward (keeping ``retain``), then the seed where ``seed``.

    The seed is the upstream gradient of the final output, where backward starts.
    """
    builder = ScheduleBuilder(plan.equation.size_dict)
    builder.events.extend(forward_schedule(plan, retain))
    if seed:
        final = plan.steps[-1]
        builder.alloc(f"g{final.output}", final.output_term, op="seed",
                      equation=f"->{final.output_term}")
    return builder


def _step_gradients(
    builder: ScheduleBuilder, step: Step, needs: Mapping[int, bool], num_ops: int,
    positions: Iterable[int] | None = None, release: bool = True,
) -> None:
    """The gradients of one step's inputs from the gradient of its output.

    Args:
        builder: Receives the events.
        step: The forward step.
        needs: Whether each tensor (by single-use id) leads to a wanted gradient.
        num_ops: Operands of the equation.
        positions: The step inputs (by position) whose gradients to make; None: every
            one that needs a gradient.
        release: The output's gradient is done with afterwards: the last gradient may
            take it over, else it is freed (False: it stays live for more gradients).
    """
    size_dict = builder.size_dict
    upstream = f"g{step.output}"
    consumed = False
    # Smallest gradient first: its workspace comes and goes before the large one
    # is allocated.
    chosen = (range(len(step.inputs)) if positions is None else positions)
    wanted = sorted(
        (pos for pos in chosen if needs[step.inputs[pos]]),
        key=lambda pos: size_of(step.input_terms[pos], size_dict),
    )
    pair = len(step.inputs) == 2
    for pos in wanted:
        i = step.inputs[pos]
        if pair and _pair_gradient(builder, step, pos, num_ops, upstream):
            continue
        sources = [upstream] + [
            tensor_name(step.inputs[q], num_ops) for q in range(len(step.inputs)) if q != pos
        ]
        consumed = builder.gradient(
            steps=(single_step_core(step, pos, size_dict),),
            num_sources=len(step.inputs),
            sources=sources,
            target=f"d{i}" if i < num_ops else f"g{i}",
            target_term=step.input_terms[pos],
            operand=i if i < num_ops else None,
            prefix=f"c{i}.",
            can_consume=release and pos == wanted[-1],
        )
    if release and not consumed:
        builder.free(upstream, step.output_term)


def _pair_gradient(builder: ScheduleBuilder, step: Step, pos: int, num_ops: int,
                   upstream: str) -> bool:
    """The gradient of input ``pos`` of a pairwise step, where it is one plain contraction.

    ``dA = einsum(C, B -> A)`` when A repeats no label and each of its labels is in C or
    B (as a rule): its core's output is A itself, in A's order, so the event is what
    :meth:`ScheduleBuilder.gradient` makes of :func:`single_step_core` (no view, no
    embedding), built without either. Its FLOPs: the joint labels are A's and B's (C
    holds no others). Returns False, adding nothing, for any other gradient.
    """
    target_term = step.input_terms[pos]
    other = step.input_terms[1 - pos]
    output = step.output_term
    labels, others = set(target_term), set(other)
    if len(labels) != len(target_term) or not (labels - others).issubset(output):
        return False
    size_dict = builder.size_dict
    i = step.inputs[pos]
    # Something summed: B holds a label A lacks (opt_einsum's convention, count_flops).
    flops = math.prod(map(size_dict.__getitem__, labels | others)) * (1 if others <= labels else 2)
    builder.events.append(Event(
        "alloc", f"d{i}" if i < num_ops else f"g{i}", size_of(target_term, size_dict),
        "backward", "contract", (upstream, tensor_name(step.inputs[1 - pos], num_ops)),
        f"{output},{other}->{target_term}", "", (), flops,
    ))
    if i < num_ops:
        builder.operand_flops[i] = builder.operand_flops.get(i, 0) + flops
    else:
        builder.shared_flops += flops
    return True


def build_reverse(given: StrategyInput) -> ScheduleBuilder:
    """The ``reverse`` strategy's builder."""
    return reverse_events(given.plan, given.grad)


SPEC = StrategySpec(
    name="reverse",
    build=build_reverse,
    description="reverse mode through the forward tree, keeping each step input that "
    "another input's gradient reads",
)
