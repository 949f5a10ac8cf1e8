"""Every corpus equation against every optimizer: normalisation, costs, paths, values."""

from __future__ import annotations

import math

import numpy as np
import opt_einsum
import pytest
from corpus import CASES, CATEGORIES, by_category, make_operands, small_cases

from einsum_analyze import analyze, parse_equation, plan_contraction
from einsum_analyze.model.planning import OPTIMIZERS

# The costliest searches are skipped on the largest networks to keep the suite fast.
EXHAUSTIVE = {"optimal", "branch-all", "branch-2"}
RANDOMISED = {"random-greedy", "random-greedy-128"}


def _reference(equation: str, arrays: list[np.ndarray]) -> np.ndarray:
    try:
        return np.asarray(np.einsum(equation, *arrays, optimize="greedy"))
    except ValueError:  # e.g. '...ij->ij': numpy wants '...' in the output, torch sums it
        import torch

        return torch.einsum(equation, *[torch.from_numpy(a.copy()) for a in arrays]).numpy()


def test_corpus_is_categorised():
    assert set(CATEGORIES) >= {
        "scalar", "hadamard", "gemm", "diagonal", "outer", "private", "broadcast", "ellipsis",
        "implicit", "uppercase", "opt_einsum", "bench",
    }
    assert all(by_category(category) for category in CATEGORIES)
    for case in CASES:
        arrays = make_operands(case) if case.input_elements < 200_000 else []
        for array, shape in zip(arrays, case.shapes, strict=False):
            assert array.shape == shape
            assert array.dtype == np.float64


def test_make_operands_is_deterministic():
    case = CASES[0]
    first = make_operands(case, seed=3)
    again = make_operands(case, seed=3)
    assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))
    assert make_operands(case, dtype=np.complex128)[0].dtype == np.complex128


@pytest.mark.parametrize("case", CASES, ids=str)
def test_corpus_normalises(case):
    eq = parse_equation(case.equation, case.shapes)
    assert "..." not in eq.explicit
    assert eq.shapes == case.shapes
    for term, shape in zip(eq.terms, eq.shapes, strict=True):
        assert [eq.size_dict[c] for c in term] == list(shape)
    assert len(set(eq.output)) == len(eq.output)


@pytest.mark.parametrize("case", small_cases(), ids=str)
def test_corpus_value_is_preserved(case):
    eq = parse_equation(case.equation, case.shapes)
    arrays = make_operands(case, seed=7)
    expected = _reference(case.equation, arrays)
    got = np.einsum(eq.explicit, *arrays, optimize="greedy")
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-10)
    # executing the plan step by step gives the same
    plan = analyze(case.equation, case.shapes, strategies=()).plan
    tensors = dict(enumerate(arrays))
    for step in plan.steps:
        tensors[step.output] = np.asarray(
            np.einsum(step.equation, *(tensors.pop(i) for i in step.inputs))
        )
    np.testing.assert_allclose(tensors[plan.output_id], expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("optimizer", OPTIMIZERS)
@pytest.mark.parametrize("case", CASES, ids=str)
def test_corpus_costs_match_opt_einsum(case, optimizer):
    if optimizer in EXHAUSTIVE and len(case.shapes) > 8:
        pytest.skip("costly search on a large network")
    eq = parse_equation(case.equation, case.shapes)
    plan = plan_contraction(eq, optimizer)
    path = [list(step) for step in plan.path]
    info = opt_einsum.contract_path(eq.explicit, *eq.shapes, shapes=True, optimize=path)[1]
    assert plan.flops == int(info.opt_cost)
    assert plan.naive_flops == int(info.naive_cost)
    assert plan.largest_intermediate_elements == int(info.largest_intermediate)
    assert [s.equation for s in plan.steps] == [c[2] for c in info.contraction_list]
    assert [s.scaling for s in plan.steps] == list(info.scale_list)
    if optimizer not in RANDOMISED:
        expected = opt_einsum.contract_path(eq.explicit, *eq.shapes, shapes=True,
                                            optimize=optimizer)[0]
        assert plan.path == tuple(tuple(int(i) for i in step) for step in expected)


@pytest.mark.parametrize("case", by_category("bench"), ids=str)
def test_bench_cases_analyse_without_allocating(case):
    report = analyze(case.equation, case.shapes, strategies=())
    itemsize = 4
    assert report.forward_memory.input_bytes == itemsize * sum(
        math.prod(shape) for shape in case.shapes
    )
    assert report.forward_memory.peak_bytes >= report.forward_memory.input_bytes
