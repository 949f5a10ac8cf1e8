"""A budget is a guarantee through the drop-in as through the CLI: measured <= budget.

The cpu allocator's events (``torch.profiler``, as the CLI's executor measures) give the
drop-in's forward and backward peaks above what the caller holds. The plan's peak counts
the inputs, the forward output held through backward and the upstream gradient made at
backward's start (the executor's seed), so each phase is compared on that basis. The
gradients are checked against torch.autograd of torch.einsum in float64.
"""

from __future__ import annotations

import pytest
import torch

import einsum_analyze.torch as dropin
from einsum_analyze import analyze
from einsum_analyze.backends.torch_backend import allocator_peak_cpu
from einsum_analyze.training.choice import choose_dropin

FACTORS = ("ir,jr,kr->ijk", ((48, 16), (48, 16), (48, 16)))
"""The issue's failing example at a cpu size: three factors into a full tensor."""

CASES = [
    # (equation, shapes, share): budgets F + share (P - F) that some plan meets (at 0.6
    # nothing does: the smallest peak the search reaches is above it).
    (*FACTORS, 0.999),
    (*FACTORS, 0.8),
    ("ab,bc,cd->ad", ((64, 48), (48, 96), (96, 32)), 0.999),
]


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


@pytest.mark.parametrize(("equation", "shapes", "share"), CASES)
def test_the_drop_in_runs_within_its_budget(equation: str, shapes, share: float) -> None:
    # Budgets between the floor F and reverse mode's peak P: F + share (P - F).
    report = analyze(equation, shapes, dtype="float64", strategies=("reverse",),
                     budget=10**12)
    assert report.budget is not None
    floor, peak = report.budget.floor_bytes, report.strategies[0].memory.peak_bytes
    budget = int(floor + share * (peak - floor))
    choice = choose_dropin(equation, shapes, "float64", range(len(shapes)), "auto", "auto",
                           budget)
    assert not choice.runs_torch and choice.result.memory.peak_bytes <= budget
    dropin.clear_cache()
    generator = torch.Generator().manual_seed(0)
    leaves = [torch.randn(s, generator=generator, dtype=torch.float64).requires_grad_()
              for s in shapes]
    inputs = sum(_nbytes(t) for t in leaves)
    dropin.einsum(equation, *leaves, budget=budget)  # plans once, outside the measurement
    forward_peak, _ = allocator_peak_cpu(lambda: dropin.einsum(equation, *leaves,
                                                              budget=budget))
    assert forward_peak + inputs <= budget
    y = dropin.einsum(equation, *leaves, budget=budget)
    upstream = torch.randn(y.shape, generator=generator, dtype=torch.float64)
    grads: list[tuple[torch.Tensor, ...]] = []
    backward_peak, _ = allocator_peak_cpu(lambda: grads.append(torch.autograd.grad(
        y, leaves, upstream, retain_graph=True)))
    assert backward_peak + inputs + _nbytes(y) + _nbytes(upstream) <= budget
    exact = [t.detach().requires_grad_() for t in leaves]
    want = torch.autograd.grad(torch.einsum(equation, *exact), exact, upstream)
    for got, wanted in zip(grads[0], want, strict=True):
        torch.testing.assert_close(got, wanted)
