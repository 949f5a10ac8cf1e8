"""Properties of normalisation, planning and forward memory on random einsums."""

from __future__ import annotations

import json
import math

import numpy as np
import opt_einsum
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from report_schema import validate_report
from strategies import EinsumProblem, einsum_problems, relabel, relabellings

from einsum_analyze import Plan, analyze, parse_equation, plan_contraction
from einsum_analyze.model.pairwise import pairwise_path

ITEMSIZE = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "complex64": 8,
            "complex128": 16}


def _ascii(text: str) -> bool:
    return all(char.isascii() for char in text)


def _operands(problem: EinsumProblem, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [np.asarray(rng.standard_normal(shape)) for shape in problem.shapes]


def _reference(equation: str, arrays: list[np.ndarray]) -> np.ndarray:
    """einsum of the user's text: numpy, or torch where numpy refuses the text."""
    try:
        return np.asarray(np.einsum(equation, *arrays))
    except ValueError:
        import torch

        tensors = [torch.from_numpy(a.copy()) for a in arrays]  # keeps 0-d arrays 0-d
        return torch.einsum(equation, *tensors).numpy()


def _path_info(plan: Plan):
    eq = plan.equation
    return opt_einsum.contract_path(
        eq.explicit, *eq.shapes, shapes=True, optimize=[list(step) for step in plan.path]
    )[1]


# --- (a) and (b): agreement with opt_einsum ------------------------------------------------


@given(einsum_problems())
def test_costs_match_opt_einsum_for_our_path(problem):
    plan = analyze(problem.equation, problem.shapes, strategies=()).plan
    info = _path_info(plan)
    assert plan.flops == int(info.opt_cost)
    assert plan.largest_intermediate_elements == int(info.largest_intermediate)
    assert plan.naive_flops == int(info.naive_cost)
    # step by step: opt_einsum's contraction list and its FLOP formula on its own sets
    contractions = info.contraction_list
    assert [s.equation for s in plan.steps] == [c[2] for c in contractions]
    assert [set(s.summed) for s in plan.steps] == [set(c[1]) for c in contractions]
    assert [s.scaling for s in plan.steps] == list(info.scale_list)
    assert [s.output_elements for s in plan.steps] == list(info.size_list)
    assert [s.flops for s in plan.steps] == [
        opt_einsum.helpers.flop_count(
            set(c[2].split("->")[0].replace(",", "")), bool(c[1]), len(c[0]),
            dict(plan.equation.size_dict),
        )
        for c in contractions
    ]


@pytest.mark.parametrize("optimizer", ["greedy", "optimal", "dp"])
@given(problem=einsum_problems())
def test_path_matches_opt_einsum(optimizer, problem):
    eq = parse_equation(problem.equation, problem.shapes)
    plan = plan_contraction(eq, optimizer)
    expected = opt_einsum.contract_path(eq.explicit, *eq.shapes, shapes=True, optimize=optimizer)
    assert plan.path == tuple(tuple(int(i) for i in step) for step in expected[0])
    assert plan.flops == int(expected[1].opt_cost)


@given(problem=einsum_problems(min_operands=3), limit=st.integers(1, 64))
def test_memory_limited_path_matches_opt_einsum(problem, limit):
    eq = parse_equation(problem.equation, problem.shapes)
    plan = plan_contraction(eq, "greedy", limit)
    expected = opt_einsum.contract_path(
        eq.explicit, *eq.shapes, shapes=True, optimize="greedy", memory_limit=limit
    )[0]
    assert plan.as_planned.path == tuple(tuple(int(i) for i in step) for step in expected)
    # What runs is that path with its steps of three or more tensors split pairwise.
    assert plan.path == pairwise_path(eq, plan.as_planned.path)


# --- (c): normalising and planning keep the value ------------------------------------------


@given(einsum_problems())
def test_normalisation_preserves_the_value(problem):
    eq = parse_equation(problem.equation, problem.shapes)
    assume(_ascii(eq.explicit))
    arrays = _operands(problem)
    expected = _reference(problem.equation, arrays)
    got = np.einsum(eq.explicit, *arrays)
    assert np.shape(got) == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-10)


@given(einsum_problems())
def test_executing_the_plan_gives_the_einsum(problem):
    plan = analyze(problem.equation, problem.shapes, strategies=()).plan
    assume(_ascii(plan.equation.explicit))
    arrays = _operands(problem, seed=1)
    tensors: dict[int, np.ndarray] = dict(enumerate(arrays))
    for step in plan.steps:
        result = np.einsum(step.equation, *(tensors.pop(i) for i in step.inputs))
        assert np.size(result) == step.output_elements
        tensors[step.output] = np.asarray(result)
    assert list(tensors) == [plan.output_id]
    np.testing.assert_allclose(
        tensors[plan.output_id], _reference(problem.equation, arrays), rtol=1e-10, atol=1e-10
    )


# --- (d): invariants ---------------------------------------------------------------------


@given(problem=einsum_problems(), mapping=relabellings())
def test_relabelling_does_not_change_costs(problem, mapping):
    renamed = relabel(problem.equation, mapping)
    eq = parse_equation(problem.equation, problem.shapes)
    eq2 = parse_equation(renamed, problem.shapes)
    assert sorted(eq.size_dict.values()) == sorted(eq2.size_dict.values())
    # the same path costs the same
    plan = plan_contraction(eq, "greedy")
    same = Plan.from_path(eq2, plan.path)
    assert same.flops == plan.flops
    assert same.naive_flops == plan.naive_flops
    assert same.largest_intermediate_elements == plan.largest_intermediate_elements
    assert [s.output_elements for s in same.steps] == [s.output_elements for s in plan.steps]
    assert [len(s.summed) for s in same.steps] == [len(s.summed) for s in plan.steps]
    # the best path is as good under any names
    assert plan_contraction(eq2, "optimal").flops == plan_contraction(eq, "optimal").flops
    mem = analyze(problem.equation, problem.shapes, optimize=plan.path,
                  strategies=()).forward_memory
    mem2 = analyze(renamed, problem.shapes, optimize=plan.path, strategies=()).forward_memory
    assert (mem.peak_bytes, mem.input_bytes) == (mem2.peak_bytes, mem2.input_bytes)


@given(problem=einsum_problems(), dtype=st.sampled_from(sorted(ITEMSIZE)))
def test_peak_bounds(problem, dtype):
    report = analyze(problem.equation, problem.shapes, dtype=dtype, strategies=())
    mem = report.forward_memory
    itemsize = ITEMSIZE[dtype]
    assert report.itemsize == itemsize
    inputs = [math.prod(shape) * itemsize for shape in problem.shapes]
    assert mem.input_bytes == sum(inputs)
    assert mem.peak_bytes >= max(inputs)
    output = report.plan.steps[-1].output_elements * itemsize
    assert mem.peak_bytes >= mem.input_bytes + output
    assert mem.peak_bytes_without_inputs >= report.plan.largest_intermediate_elements * itemsize
    assert mem.retained_bytes == 0
    assert mem.forward_peak_bytes == mem.peak_bytes


@given(problem=einsum_problems(), dtype=st.sampled_from(sorted(ITEMSIZE)))
def test_bytes_scale_with_dtype_size(problem, dtype):
    one = analyze(problem.equation, problem.shapes, dtype="float16", optimize="greedy",
                  strategies=())
    other = analyze(problem.equation, problem.shapes, dtype=dtype, optimize="greedy",
                    strategies=())
    scale = ITEMSIZE[dtype] // 2
    assert other.plan.path == one.plan.path
    for name in ("input_bytes", "peak_bytes", "final_bytes", "forward_peak_bytes"):
        assert getattr(other.forward_memory, name) == getattr(one.forward_memory, name) * scale
    d1, d2 = one.to_dict()["forward"], other.to_dict()["forward"]
    for key in ("peak_bytes", "peak_bytes_without_inputs", "input_bytes", "output_bytes",
                "largest_intermediate_bytes"):
        assert d2[key] == d1[key] * scale
    assert d2["flops"] == d1["flops"]


@given(einsum_problems())
def test_report_validates_against_the_schema_and_round_trips(problem):
    for strategies in ((), None):
        kwargs = {} if strategies is None else {"strategies": strategies}
        data = analyze(problem.equation, problem.shapes, **kwargs).to_dict()
        validate_report(data)
        assert json.loads(json.dumps(data, allow_nan=False)) == data
