"""``torch-autograd``: what torch.einsum and autograd really do (docs/method.md section 5).

torch.einsum plans its own path (``torch.backends.opt_einsum.strategy``, ``auto`` by
default, on the equation as typed), whatever ``--optimize`` chose for the report; it sums
away the labels private to one operand first, and copies an input before ``bmm`` where a
reshape cannot be a view. Autograd keeps those copies for backward.
:mod:`einsum_analyze.torch_model.forward` models all of that label by label; this module
registers it. The schedule is not lowered: it models torch, not our executor.
"""

from __future__ import annotations

from ..torch_model.forward import torch_autograd_schedule
from .common import ScheduleBuilder, StrategyInput
from .registry import StrategySpec

__all__ = ["SPEC", "build_torch_model"]

TORCH_STRATEGIES = ("auto", "greedy", "optimal", "left-to-right")
"""Values of ``torch.backends.opt_einsum.strategy`` the model follows; ``left-to-right`` is
torch without opt_einsum."""


def build_torch_model(given: StrategyInput) -> ScheduleBuilder:
    """The ``torch-autograd`` model's builder."""
    strategy = str(given.options["torch_strategy"])
    if strategy not in TORCH_STRATEGIES:
        from ..errors import PlanningError

        raise PlanningError(
            f"torch_strategy {strategy!r} is not one of: {', '.join(TORCH_STRATEGIES)}"
        )
    equation = given.plan.equation
    schedule = torch_autograd_schedule(
        equation, sorted(given.grad),
        strategy=None if strategy == "left-to-right" else strategy,
    )
    builder = ScheduleBuilder(equation.size_dict)
    builder.events.extend(schedule.events)
    builder.operand_flops.update(schedule.operand_flops)
    builder.shared_flops = schedule.shared_flops
    builder.optimizer = f"torch.einsum ({strategy})"
    builder.output_elements = schedule.output_elements
    return builder


SPEC = StrategySpec(
    name="torch-autograd",
    build=build_torch_model,
    description="a model of torch.einsum under autograd: its own path, its copies, what "
    "it keeps for backward",
    lowered=False,
    own_path=True,
    options={"torch_strategy": "auto"},
)
