"""The drop-in einsum on CUDA: gradients against the float64 oracle, and its measured
peak against the plan's prediction and against torch.einsum under autograd.

Skipped without CUDA (tests/conftest.py skips every test marked gpu).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

CASES = json.loads((Path(__file__).parents[2] / "benchmarks" / "cases.json").read_text())["cases"]
SLACK = 4096  # the bound: never above torch.einsum's peak by more than 4 KiB


def _peak(step: Any) -> int:
    import torch

    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    kept = step()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    del kept
    return int(peak)


@pytest.mark.gpu
@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_cuda_gradients_and_peak(case: dict[str, Any]) -> None:
    import torch

    from einsum_analyze.torch import einsum

    shapes = [tuple(s) for s in case["shapes"]]
    if sum(math.prod(s) for s in shapes) * 4 > 2**31:
        pytest.skip("operands over 2 GiB")
    generator = torch.Generator().manual_seed(0)
    operands = [torch.randn(s, generator=generator).cuda().requires_grad_() for s in shapes]
    upstream_shape = torch.einsum(case["equation"], *[o.detach() for o in operands]).shape
    upstream = torch.randn(upstream_shape, generator=generator).cuda()

    def ours() -> Any:
        y = einsum(case["equation"], *operands)
        return torch.autograd.grad(y, operands, upstream)

    def theirs() -> Any:
        y = torch.einsum(case["equation"], *operands)
        return torch.autograd.grad(y, operands, upstream)

    got = ours()  # warm: plan cached, library handles created
    theirs()
    precise = [o.detach().double().requires_grad_() for o in operands]
    want = torch.autograd.grad(torch.einsum(case["equation"], *precise), precise,
                               upstream.double())
    for g, w in zip(got, want, strict=True):
        scale = max(1.0, float(w.abs().max()))
        assert float((g.double() - w).abs().max()) <= 1e-3 * scale
    del got, want, precise
    ours_peak, theirs_peak = _peak(ours), _peak(theirs)
    assert ours_peak <= theirs_peak + SLACK, (ours_peak, theirs_peak)


@pytest.mark.gpu
# The graph holds torch.einsum itself where the drop-in runs it (no plan beats it), and
# inductor warns that float32 products could use TF32: advice, not a fault.
@pytest.mark.filterwarnings("ignore:TensorFloat32 tensor cores:UserWarning")
def test_cuda_compiled_module_matches_eager() -> None:
    import torch

    from einsum_analyze.torch import Einsum

    layer = Einsum("bhqd,bhkd,bhkv->bhqv").cuda()
    q, k, v = (torch.randn(2, 4, 64, 32, device="cuda", requires_grad=True) for _ in range(3))
    compiled = torch.compile(layer, fullgraph=True)
    compiled(q, k, v).square().sum().backward()
    got = q.grad.clone()
    q.grad = None
    layer(q, k, v).square().sum().backward()
    torch.testing.assert_close(got, q.grad, rtol=1e-4, atol=1e-4)
