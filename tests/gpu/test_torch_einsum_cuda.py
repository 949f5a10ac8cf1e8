"""The torch-autograd model on CUDA: what torch keeps, and its peaks, as the device sees them.

Skipped without CUDA (tests/conftest.py skips every test marked gpu). On the CPU the model's
retained bytes equal ``saved_tensors_hooks`` and its peaks equal the allocator's
(tests/property/test_torch_einsum_saved.py); here the same on the CUDA caching allocator,
which rounds every block up to 512 bytes: kept bytes exact, and the peaks within cuBLAS's
staging copies of strided bmm operands above the model (docs/method.md section 9).
"""

from __future__ import annotations

import gc
import math

import pytest
import torch
from corpus import CASES, Case

from einsum_analyze.model.equation import parse_equation
from einsum_analyze.model.memory import simulate_memory
from einsum_analyze.torch_model.forward import torch_autograd_schedule

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
    # An earlier test's garbage freed by a collection inside the measured region would
    # lower the peak below the model's (2,048 B against 3,072 for diag-then-outer in
    # float64 on the H200, 2026-12-02): collected first, the collector paused inside.
    gc.collect()
    gc.disable()
    try:
        return _measured(case, grad, leaves, pack, saved, dtype)
    finally:
        gc.enable()


def _measured(case: Case, grad: list[int], leaves, pack, saved, dtype) -> tuple[int, int, int]:
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = torch.einsum(case.equation, *leaves)
    torch.cuda.synchronize()
    forward = torch.cuda.max_memory_allocated() - base
    if grad:
        upstream = torch.ones(y.shape, dtype=dtype, device=y.device)
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
    # cuBLAS stages a bmm operand that has no unit stride in its matrix dims (a diagonal,
    # a strided reshape) in a contiguous copy freed after the call; the CPU's bmm reads
    # it as it is (docs/method.md section 9). At most both operands of one bmm: a bound.
    staging = 2 * _largest_block(eq, model.events, itemsize)
    assert memory.forward_peak_bytes <= forward <= memory.forward_peak_bytes + staging, (
        forward, memory.forward_peak_bytes)
    if any(len(term) - len(set(term)) >= 2 for term in eq.terms):
        # chains of diagonal embeddings: the model is an upper bound, staging aside
        assert peak <= memory.peak_bytes + staging
    else:
        assert memory.peak_bytes <= peak <= memory.peak_bytes + staging, (
            peak, memory.peak_bytes)


def _largest_block(eq, events, itemsize: int) -> int:
    """The largest tensor of the contraction (an operand or a modelled one), as allocated."""
    sizes = eq.size_dict
    operands = [math.prod(sizes[c] for c in term) for term in eq.terms]
    elements = max([*operands, *(e.elements for e in events if e.kind == "alloc")])
    return -(-elements * itemsize // ROUNDING) * ROUNDING


@pytest.mark.gpu
def test_cuda_bmm_stages_an_operand_with_no_unit_stride() -> None:
    # The mechanism the bound above allows for (docs/method.md section 9): a diagonal view as a
    # bmm operand, strides (16, 5) in its matrix dims, is cloned for cuBLAS; a contiguous
    # one is not.
    device = torch.device("cuda")
    x = torch.randn(3, 4, 4, device=device)
    b = torch.randn(1, 4, 2, device=device)
    diagonal = x.diagonal(dim1=1, dim2=2).unsqueeze(0)  # (1, 3, 4)
    dense = diagonal.contiguous()
    torch.bmm(dense, b)  # cuBLAS handle and workspace first
    torch.cuda.synchronize()
    peaks = []
    for operand in (dense, diagonal):
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        out = torch.bmm(operand, b)
        torch.cuda.synchronize()
        peaks.append(torch.cuda.max_memory_allocated() - base)
        del out
    assert peaks == [ROUNDING, 2 * ROUNDING]
