"""``independent``: each operand's gradient as its own planned einsum (docs/method.md section 5).

The forward pass runs as inference (nothing retained); then each differentiated
operand's core contraction (:mod:`einsum_analyze.gradients`), planned on its own by
:func:`~einsum_analyze.strategies.gradient_plans.plan_gradients`, runs from the upstream
gradient and the operands. FLOPs grow with the number of operands.
"""

from __future__ import annotations

from ..memory import forward_schedule, tensor_name
from .common import ScheduleBuilder, StrategyInput
from .registry import StrategySpec

__all__ = ["SPEC", "build_independent"]


def build_independent(given: StrategyInput) -> ScheduleBuilder:
    """Inference forward, then every gradient's core contraction planned on its own."""
    plan, gradients = given.plan, given.gradients
    if gradients is None:
        raise ValueError("the independent strategy needs the planned gradients")
    num_ops = plan.equation.num_operands
    builder = ScheduleBuilder(plan.equation.size_dict)
    builder.optimizer = gradients.optimizer
    builder.warnings.extend(gradients.warnings)
    builder.events.extend(forward_schedule(plan))
    if not gradients.specs:
        return builder
    output = plan.equation.output
    builder.alloc("G", output, op="seed", equation=f"->{output}")
    last = len(gradients.specs) - 1
    consumed = False
    for number, (spec, core) in enumerate(zip(gradients.specs, gradients.plans, strict=True)):
        sources = ["G" if src < 0 else tensor_name(src, num_ops) for src in spec.core_sources]
        consumed = builder.gradient(
            steps=core.steps,
            num_sources=core.equation.num_operands,
            sources=sources,
            target=f"d{spec.operand}",
            target_term=spec.term,
            operand=spec.operand,
            prefix=f"c{spec.operand}.",
            can_consume=number == last,
        )
    if not consumed:
        builder.free("G", output)
    return builder


SPEC = StrategySpec(
    name="independent",
    build=build_independent,
    needs_gradient_plans=True,
    description="each operand's gradient as its own planned einsum, retaining nothing",
)
