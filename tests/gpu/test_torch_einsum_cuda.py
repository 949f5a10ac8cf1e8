"""The torch-autograd model on CUDA: what torch keeps, and its peaks, as the device sees them.

Skipped without CUDA (tests/conftest.py skips every test marked gpu). On the CPU the model's
retained bytes equal ``saved_tensors_hooks`` and its peaks equal the allocator's
(tests/property/test_torch_einsum_saved.py); here the same on the CUDA caching allocator,
which rounds every block up to 512 bytes.
"""

from __future__ import annotations

import pytest
import torch
from corpus import CASES, Case

from einsum_analyze.equation import parse_equation
from einsum_analyze.memory import simulate_memory
from einsum_analyze.torch_einsum import torch_autograd_schedule

ROUNDING = 512
GPU_CASES = [c for c in CASES if c.input_elements <= 2_000_000]


def _measure(case: Case, grad: list[int], dtype) -> tuple[int, int, int]:
    """Kept bytes (saved_tensors_hooks), forward and training peaks above the operands."""
    device = torch.device("cuda")
    operands = [torch.randn(shape, dtype=dtype, device=device) for shape in case.shapes]
    # One run first: cuBLAS handles and workspaces are created once and stay.
    warm = [t.detach().requires_grad_(k in grad) for k, t in enumerate(operands)]
    y = torch.einsum(case.equation, *warm)
    if grad:
        torch.autograd.grad(y, [warm[k] for k in grad], torch.ones_like(y))
    del warm, y
    torch.cuda.synchronize()
    inputs = {t.untyped_storage().data_ptr() for t in operands}
    saved: dict[int, int] = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in inputs:
            saved[storage.data_ptr()] = storage.nbytes()
        return tensor

    leaves = [t.detach().requires_grad_(k in grad) for k, t in enumerate(operands)]
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = torch.einsum(case.equation, *leaves)
    torch.cuda.synchronize()
    forward = torch.cuda.max_memory_allocated() - base
    if grad:
        upstream = torch.ones(y.shape, dtype=dtype, device=device)
        torch.autograd.grad(y, [leaves[k] for k in grad], upstream)
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    return sum(saved.values()), forward, peak


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("case", GPU_CASES, ids=str)
def test_cuda_kept_bytes_and_peaks(case: Case, dtype) -> None:
    eq = parse_equation(case.equation, case.shapes)
    grad = list(range(eq.num_operands))
    itemsize = torch.empty((), dtype=dtype).element_size()
    model = torch_autograd_schedule(eq, grad)
    memory = simulate_memory(model.events, input_elements=0,
                             output_elements=model.output_elements, itemsize=itemsize,
                             granularity=ROUNDING)
    kept, forward, peak = _measure(case, grad, dtype)
    assert kept == model.retained_elements * itemsize
    assert forward == memory.forward_peak_bytes
    if any(len(term) - len(set(term)) >= 2 for term in eq.terms):
        assert peak <= memory.peak_bytes  # chains of diagonal embeddings: an upper bound
    else:
        assert peak == memory.peak_bytes
