"""The float64 oracle the strategy tests share: seeded inputs, torch.autograd of
torch.einsum, and a closeness check scaled to the expected values."""

from __future__ import annotations

import math
from typing import Any

import torch
from hypothesis import assume
from hypothesis import strategies as st
from strategies import grad_subsets

from einsum_analyze import parse_equation, plan_contraction
from einsum_analyze.model.planning import Plan


def make_inputs(plan: Plan, seed: int, dtype: str) -> tuple[list[torch.Tensor], torch.Tensor]:
    """Seeded operands of the plan's shapes and an upstream gradient of its output."""
    eq = plan.equation
    generator = torch.Generator().manual_seed(seed)
    kind = getattr(torch, dtype)
    operands = [torch.randn(shape, generator=generator, dtype=kind) for shape in eq.shapes]
    upstream = torch.randn([eq.size_dict[c] for c in eq.output], generator=generator,
                           dtype=kind)
    return operands, upstream


def oracle(text: str, operands: Any, upstream: Any, grad: Any) -> Any:
    """torch.einsum's output and the gradients of ``grad`` under torch.autograd."""
    leaves = [t.detach().clone().requires_grad_(k in grad) for k, t in enumerate(operands)]
    with torch.enable_grad():
        output = torch.einsum(text, *leaves)
        grads = (torch.autograd.grad(output, [leaves[k] for k in grad],
                                     upstream.reshape(output.shape)) if grad else ())
    return output.detach(), dict(zip(grad, grads, strict=True))


def assert_close(got: Any, want: Any, what: str) -> None:
    """Same shape, and equal to float64 rounding relative to the largest expected value."""
    assert tuple(got.shape) == tuple(want.shape), what
    scale = float(want.abs().max()) if want.numel() else 0.0
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12 * max(scale, 1.0),
                               msg=lambda m: f"{what}: {m}")


SMALL = 4096
"""Elements: the largest joint index space of a step in a drawn problem."""


def small_enough(plan: Plan) -> bool:
    """Every step of ``plan`` spans at most :data:`SMALL` elements."""
    eq = plan.equation
    joint = max(math.prod(eq.size_dict[c] for c in set("".join(step.input_terms)))
                for step in plan.steps)
    return joint <= SMALL


def drawn_plan(problem: Any, data: st.DataObject) -> tuple[Plan, list[int]]:
    """A drawn problem's plan (greedy or optimal; small enough to run) and drawn grad set."""
    eq = parse_equation(problem.equation, problem.shapes)
    plan = plan_contraction(eq, data.draw(st.sampled_from(["greedy", "optimal"])))
    assume(small_enough(plan))
    return plan, data.draw(grad_subsets(eq.num_operands), label="grad")
