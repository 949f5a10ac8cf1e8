"""The torch-autograd model keeps exactly what torch autograd keeps (issue 8, item 5).

What torch keeps is counted as the runner counts it: ``saved_tensors_hooks`` sees every
tensor autograd saves; each distinct storage counts once, the caller's operands' storages
not at all. The model must give that figure on every corpus equation (opt_einsum's test
equations included), for every subset of operands needing a gradient tried here, in
float32 and float64, whatever ``--optimize`` chose: torch plans its own path.
"""

from __future__ import annotations

import math

import pytest
import torch
from corpus import CASES, Case
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from strategies import EinsumProblem, einsum_problems, grad_subsets

from einsum_analyze.backends.torch_backend import run_schedule
from einsum_analyze.model.equation import parse_equation
from einsum_analyze.model.planning import OPTIMIZERS, plan_contraction
from einsum_analyze.strategies import build_strategy
from einsum_analyze.torch_model.forward import torch_autograd_schedule

SMALL = 200_000  # input elements: cases run for every grad subset and dtype
LARGE = 2_000_000  # input elements: larger cases run once


def kept_bytes(text: str, shapes, grad, dtype) -> int:
    """Bytes torch autograd keeps for torch.einsum, counted by storage, operands excluded."""
    operands = [torch.randn(shape, dtype=dtype) for shape in shapes]
    leaves = [t.detach().requires_grad_(k in grad) for k, t in enumerate(operands)]
    inputs = {t.untyped_storage().data_ptr() for t in operands}
    saved: dict[int, int] = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in inputs:
            saved[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        output = torch.einsum(text, *leaves)
    del output
    return sum(saved.values())


def grad_sets(n: int) -> dict[str, list[int]]:
    return {"all": list(range(n)), "first": [0], "last": [n - 1],
            "even": list(range(0, n, 2)), "none": []}


SMALL_CASES = [c for c in CASES if c.input_elements <= SMALL]
LARGE_CASES = [c for c in CASES if SMALL < c.input_elements <= LARGE]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("which", ["all", "first", "last", "even", "none"])
@pytest.mark.parametrize("case", SMALL_CASES, ids=str)
def test_kept_bytes_equal_saved_tensors_hooks(case: Case, which: str, dtype) -> None:
    eq = parse_equation(case.equation, case.shapes)
    grad = grad_sets(eq.num_operands)[which]
    itemsize = torch.empty((), dtype=dtype).element_size()
    model = torch_autograd_schedule(eq, grad)
    assert model.retained_elements * itemsize == kept_bytes(case.equation, case.shapes, grad,
                                                            dtype)


@pytest.mark.parametrize("case", LARGE_CASES, ids=str)
def test_kept_bytes_of_larger_cases(case: Case) -> None:
    eq = parse_equation(case.equation, case.shapes)
    grad = list(range(eq.num_operands))
    model = torch_autograd_schedule(eq, grad)
    assert model.retained_elements * 4 == kept_bytes(case.equation, case.shapes, grad,
                                                     torch.float32)


@pytest.mark.parametrize("case", [c for c in CASES if len(c.shapes) <= 8], ids=str)
def test_the_model_ignores_the_report_optimizer(case: Case) -> None:
    # torch.einsum plans its own path: every --optimize value gives the same model.
    eq = parse_equation(case.equation, case.shapes)
    grad = list(range(eq.num_operands))
    figures = set()
    for name in OPTIMIZERS:
        result = build_strategy("torch-autograd", plan_contraction(eq, name), grad, itemsize=8)
        figures.add((result.memory.retained_bytes, result.memory.peak_bytes,
                     result.forward_flops, result.backward_flops))
    assert len(figures) == 1


@settings(deadline=None)
@given(problem=einsum_problems(max_operands=6), data=st.data())
def test_random_equations_keep_what_torch_keeps(problem: EinsumProblem, data) -> None:
    eq = parse_equation(problem.equation, problem.shapes)
    assume(sum(math.prod(shape) for shape in problem.shapes) <= 4096)
    grad = data.draw(grad_subsets(eq.num_operands), label="grad")
    model = torch_autograd_schedule(eq, grad)
    assert model.retained_elements * 8 == kept_bytes(problem.equation, problem.shapes, grad,
                                                     torch.float64)


def _is_diagonal_view(text: str, shapes) -> bool:
    """One operand, a repeated label, nothing summed: torch returns a diagonal view."""
    eq = parse_equation(text, shapes)
    return (eq.num_operands == 1 and len(set(eq.terms[0])) < len(eq.terms[0])
            and set(eq.terms[0]) <= set(eq.output))


EXECUTABLE = [c for c in CASES if c.input_elements <= SMALL]


def check_executed(text: str, shapes, grad) -> None:
    """Run the schedule with the project's executor and compare with torch.autograd.

    Forward output and gradients equal torch's, and the executor holds what the replay
    says after every event (except for a diagonal view of one operand: the executor can
    only copy it, torch allocates nothing).
    """
    eq = parse_equation(text, shapes)
    result = build_strategy("torch-autograd", plan_contraction(eq), grad, itemsize=8)
    gen = torch.Generator().manual_seed(0)
    operands = [torch.randn(shape, dtype=torch.float64, generator=gen) for shape in shapes]
    leaves = [t.clone().requires_grad_(k in grad) for k, t in enumerate(operands)]
    with torch.enable_grad():
        output = torch.einsum(text, *leaves)
        upstream = torch.randn(output.shape, dtype=torch.float64, generator=gen)
        want = torch.autograd.grad(output, [leaves[k] for k in grad], upstream) if grad else ()
    shape = [eq.size_dict[c] for c in eq.output]
    run = run_schedule(result.events, operands, upstream.reshape(shape).contiguous(),
                       eq.size_dict)
    torch.testing.assert_close(run.output.reshape(output.shape), output.detach())
    for k, expected in zip(grad, want, strict=True):
        torch.testing.assert_close(run.gradients[k], expected)
    if not _is_diagonal_view(text, shapes):
        assert run.live_bytes == result.memory.live_bytes


@pytest.mark.parametrize("which", ["all", "last", "none"])
@pytest.mark.parametrize("case", EXECUTABLE, ids=str)
def test_the_schedule_runs_and_its_gradients_are_torchs(case: Case, which: str) -> None:
    eq = parse_equation(case.equation, case.shapes)
    check_executed(case.equation, case.shapes, grad_sets(eq.num_operands)[which])


@settings(deadline=None)
@given(problem=einsum_problems(max_operands=6), data=st.data())
def test_random_schedules_run_with_torchs_gradients(problem: EinsumProblem, data) -> None:
    assume(sum(math.prod(shape) for shape in problem.shapes) <= 4096)
    grad = data.draw(grad_subsets(len(problem.shapes)), label="grad")
    check_executed(problem.equation, problem.shapes, grad)


def profiled_peaks(text: str, shapes, grad) -> tuple[int, int]:
    """Forward peak and forward + backward peak above the operands, from the allocator.

    torch.profiler with ``profile_memory`` records every CPU allocation and free; the
    upstream gradient is made between the phases, as the runner does.
    """
    from torch.profiler import ProfilerActivity, profile

    operands = [torch.randn(shape, dtype=torch.float64).requires_grad_(k in grad)
                for k, shape in enumerate(shapes)]
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        output = torch.einsum(text, *operands)
        marker = torch.empty(1, dtype=torch.int8)  # one byte: where backward begins
        del marker
        if grad:
            upstream = torch.ones(output.shape, dtype=torch.float64)
            torch.autograd.grad(output, [operands[k] for k in grad], upstream)
    events = sorted((e for e in prof.profiler.kineto_results.events()
                     if e.name() == "[memory]"), key=lambda e: e.start_ns())
    live = forward = peak = 0
    sizes = [e.nbytes() for e in events]
    split = sizes.index(1)
    for number, size in enumerate(sizes):
        if number in (split, split + 1):  # the marker and its free
            continue
        live += size
        peak = max(peak, live)
        if number < split:
            forward = max(forward, live)
    return forward, peak


def _repeats_twice(eq) -> bool:
    return any(len(term) - len(set(term)) >= 2 for term in eq.terms)


PEAK_CASES = [c for c in CASES if c.input_elements <= 50_000]


@pytest.mark.parametrize("which", ["all", "last"])
@pytest.mark.parametrize("case", PEAK_CASES, ids=str)
def test_peaks_equal_the_allocators(case: Case, which: str) -> None:
    # Forward peak: exact. Training peak: exact, except for an operand that repeats labels
    # twice or more, whose chain of diagonal embeddings the model counts all at once.
    eq = parse_equation(case.equation, case.shapes)
    grad = grad_sets(eq.num_operands)[which]
    memory = build_strategy("torch-autograd", plan_contraction(eq), grad, itemsize=8).memory
    forward, peak = profiled_peaks(case.equation, case.shapes, grad)
    assert memory.forward_peak_bytes - memory.input_bytes == forward
    if _repeats_twice(eq):
        assert memory.peak_bytes - memory.input_bytes >= peak
    else:
        assert memory.peak_bytes - memory.input_bytes == peak
