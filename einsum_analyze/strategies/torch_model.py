"""``torch-autograd``: a model of torch autograd on the report's path (docs/method.md section 5).

torch.einsum first sums away the indices private to one operand of a step, and its
matrix product keeps that reduced copy for backward; the model adds those reductions as
steps of their own, then differentiates like ``reverse``. The permuted copies
torch.einsum may make before a matrix product are not modelled (the builder says so in
a warning). The schedule is not lowered: it models torch, not our executor.
"""

from __future__ import annotations

from ..planning import Plan, Step, count_flops, size_of
from .common import ScheduleBuilder, StrategyInput
from .registry import StrategySpec
from .reverse import reverse_events

__all__ = ["PERMUTED_COPIES_WARNING", "SPEC", "build_torch_model"]

PERMUTED_COPIES_WARNING = (
    "the torch-autograd model counts the reduced copies torch.einsum keeps for "
    "backward but not the permuted copies it may make before a matrix product"
)


def _with_private_reductions(plan: Plan) -> Plan:
    """The plan as torch.einsum runs it: operands' step-private indices summed first.

    An operand whose step sums an index of size above 1 that no other input of the step
    has gets a one-input step of its own before it; FLOPs are counted on the reduced
    steps, so this model's forward FLOPs can differ from opt_einsum's figure for the path.
    """
    equation = plan.equation
    num_ops = equation.num_operands
    if len(plan.steps) == 1 and num_ops == 1:
        return plan
    size_dict = equation.size_dict
    next_id = num_ops + len(plan.steps)
    steps: list[Step] = []
    for step in plan.steps:
        inputs = []
        terms = []
        for pos, (i, term) in enumerate(zip(step.inputs, step.input_terms, strict=True)):
            others = set(step.output_term)
            for q, other in enumerate(step.input_terms):
                if q != pos:
                    others.update(other)
            private = [char for char in dict.fromkeys(term) if char not in others]
            # A size-1 private index is a broadcast dimension: torch squeezes it, no copy.
            if i < num_ops and len(step.inputs) > 1 and any(size_dict[c] > 1 for c in private):
                reduced = "".join(char for char in dict.fromkeys(term) if char in others)
                steps.append(
                    Step(
                        index=len(steps),
                        operands=(pos,),
                        inputs=(i,),
                        output=next_id,
                        input_terms=(term,),
                        output_term=reduced,
                        removed="".join(private),
                        flops=count_flops("".join(dict.fromkeys(term)), True, 1, size_dict),
                        output_elements=size_of(reduced, size_dict),
                    )
                )
                inputs.append(next_id)
                terms.append(reduced)
                next_id += 1
            else:
                inputs.append(i)
                terms.append(term)
        joint = "".join(dict.fromkeys("".join(terms)))
        removed = "".join(char for char in joint if char not in step.output_term)
        steps.append(
            Step(
                index=len(steps),
                operands=step.operands,
                inputs=tuple(inputs),
                output=step.output,
                input_terms=tuple(terms),
                output_term=step.output_term,
                removed=removed,
                flops=count_flops(joint, bool(removed), len(terms), size_dict),
                output_elements=step.output_elements,
            )
        )
    return Plan(
        equation=equation,
        optimizer=plan.optimizer,
        path=plan.path,
        steps=tuple(steps),
        flops=plan.flops,
        naive_flops=plan.naive_flops,
        largest_intermediate_elements=plan.largest_intermediate_elements,
    )


def build_torch_model(given: StrategyInput) -> ScheduleBuilder:
    """The ``torch-autograd`` model's builder."""
    builder = reverse_events(_with_private_reductions(given.plan), given.grad)
    builder.warnings.append(PERMUTED_COPIES_WARNING)
    return builder


SPEC = StrategySpec(
    name="torch-autograd",
    build=build_torch_model,
    lowered=False,
    description="a model of torch.einsum under autograd on the same path (the baseline)",
)
