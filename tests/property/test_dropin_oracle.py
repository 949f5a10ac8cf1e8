"""Property: the drop-in einsum equals torch.autograd of torch.einsum in float64.

Random equations (repeated, private, broadcast and ellipsis labels, implicit outputs,
1 to 5 operands) with random subsets of operands needing gradients, run through
``einsum_analyze.torch.einsum`` and through the float64 oracle; outputs and gradients
must agree. Equations torch.einsum itself refuses are assumed away.
"""

from __future__ import annotations

import math

import torch
from budgets import examples
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from strategies import EinsumProblem, einsum_problems, grad_subsets

from einsum_analyze.torch import einsum


def _reference(problem: EinsumProblem, operands: list[torch.Tensor], grad: list[int],
               upstream_seed: int) -> tuple[torch.Tensor, list[torch.Tensor], torch.Tensor]:
    leaves = [t.detach().clone().requires_grad_(k in grad) for k, t in enumerate(operands)]
    y = torch.einsum(problem.equation, *leaves)
    generator = torch.Generator().manual_seed(upstream_seed)
    upstream = torch.randn(y.shape, generator=generator, dtype=y.dtype)
    wanted = [leaves[k] for k in grad]
    grads = list(torch.autograd.grad(y, wanted, upstream)) if wanted else []
    return y.detach(), grads, upstream


def _close(got: torch.Tensor, want: torch.Tensor) -> bool:
    if got.shape != want.shape:
        return False
    if not want.numel():
        return True
    scale = max(1.0, float(want.abs().max()))
    return float((got.detach() - want).abs().max()) <= 1e-10 * scale


@settings(deadline=None)
@given(problem=einsum_problems(max_operands=5), data=st.data())
def test_random_equations_match_the_float64_oracle(problem: EinsumProblem,
                                                   data: st.DataObject) -> None:
    assume(sum(math.prod(s) for s in problem.shapes) <= 4096)
    generator = torch.Generator().manual_seed(0)
    operands = [torch.randn(s, generator=generator, dtype=torch.float64)
                for s in problem.shapes]
    grad = data.draw(grad_subsets(len(operands)))
    try:
        want_y, want_grads, upstream = _reference(problem, operands, grad, 1)
    except (RuntimeError, ValueError):
        assume(False)  # torch.einsum refuses it: nothing to compare against
        raise
    leaves = [t.detach().clone().requires_grad_(k in grad) for k, t in enumerate(operands)]
    y = einsum(problem.equation, *leaves)
    assert _close(y, want_y)
    if grad:
        got = torch.autograd.grad(y, [leaves[k] for k in grad], upstream)
        for g, w in zip(got, want_grads, strict=True):
            assert _close(g, w)


@settings(deadline=None, max_examples=examples(25))
@given(problem=einsum_problems(max_operands=4, ellipsis=False), data=st.data())
def test_random_complex_equations_match_the_oracle(problem: EinsumProblem,
                                                   data: st.DataObject) -> None:
    assume(sum(math.prod(s) for s in problem.shapes) <= 4096)
    generator = torch.Generator().manual_seed(0)
    operands = [torch.randn(s, generator=generator, dtype=torch.complex128)
                for s in problem.shapes]
    grad = data.draw(grad_subsets(len(operands)))
    try:
        want_y, want_grads, upstream = _reference(problem, operands, grad, 2)
    except (RuntimeError, ValueError):
        assume(False)
        raise
    leaves = [t.detach().clone().requires_grad_(k in grad) for k, t in enumerate(operands)]
    y = einsum(problem.equation, *leaves)
    assert _close(y, want_y)
    if grad:
        got = torch.autograd.grad(y, [leaves[k] for k in grad], upstream)
        for g, w in zip(got, want_grads, strict=True):
            assert _close(g, w)
