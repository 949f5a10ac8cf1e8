"""Through the drop-in, the cpu allocator's peak equals the plan's on every dtype.

The allocator's events (``torch.profiler``, as the CLI's executor measures) give the
peak of a training step above the caller's operands: forward, then backward on an
upstream gradient made as backward starts, the output held throughout. The plan's peak
counts the same, inputs included. Complex runs copy the upstream gradient (backward
conjugates its seed in place): the plan counts that copy, the one whose last step writes
torch's layout too.
"""

from __future__ import annotations

import pytest
import torch

import einsum_analyze.torch as dropin
from einsum_analyze.backends.torch_backend import allocator_peak_cpu
from einsum_analyze.training import plans

DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64,
          torch.complex128)
CASES = [
    ("ij,jk->ik", ((5, 6), (6, 7))),  # torch's layout written by the last product
    ("ij,jk->ki", ((5, 6), (6, 7))),
    ("abc,cd->dba", ((3, 4, 5), (5, 6))),
    ("bhqd,bhkd->bhqk", ((2, 3, 4, 5), (2, 3, 6, 5))),
    ("ir,jr,kr->ijk", ((6, 3), (5, 3), (4, 3))),  # an intermediate kept for backward
]


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(("equation", "shapes"), CASES)
@pytest.mark.parametrize("strategy", ["reverse", "independent"])
def test_the_drop_in_measures_its_plans_peak(equation, shapes, dtype, strategy):
    dropin.clear_cache()
    generator = torch.Generator().manual_seed(0)
    leaves = [torch.randn(s, generator=generator, dtype=torch.float64).to(dtype)
              .requires_grad_() for s in shapes]
    inputs = sum(_nbytes(t) for t in leaves)
    # plans once, outside the measurement
    shape = dropin.einsum(equation, *leaves, strategy=strategy).shape
    (plan,) = plans._CACHE.plans.values()  # noqa: SLF001
    upstream = torch.randn(shape, generator=generator, dtype=torch.float64).to(dtype)
    grads: list[tuple[torch.Tensor, ...]] = []

    def train() -> None:
        # What a training step holds: the output through backward, the upstream gradient
        # made when backward starts (a fresh tensor, as the autograd engine hands one).
        y = dropin.einsum(equation, *leaves, strategy=strategy)
        grads.append(torch.autograd.grad(y, leaves, upstream.clone()))

    peak, _ = allocator_peak_cpu(train)
    assert peak + inputs == plan.result.memory.peak_bytes
    exact = [t.detach().to(torch.complex128 if dtype.is_complex else torch.float64)
             .requires_grad_() for t in leaves]
    want = torch.autograd.grad(torch.einsum(equation, *exact), exact,
                               upstream.to(exact[0].dtype))
    tolerance = 1e-2 if _nbytes(leaves[0]) // leaves[0].numel() == 2 else 1e-5
    for got, wanted in zip(grads[0], want, strict=True):
        torch.testing.assert_close(got.to(wanted.dtype), wanted, rtol=tolerance, atol=tolerance)
