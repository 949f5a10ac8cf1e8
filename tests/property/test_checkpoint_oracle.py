"""The checkpoint strategy's schedules, run on real tensors, against torch autograd.

For corpus cases and hypothesis-drawn equations (repeated, private and size-1 broadcast
labels), with every operand, the first, or a drawn subset differentiated, and with
several keep-sets: none kept (everything recomputed), the least peak (no budget), the
floor as budget (below reach: the least peak again), the midpoint between the floor and
reverse mode's peak, and explicit keep lists. Each schedule runs

- on the torch executor, in float64 and complex128: the output equals ``torch.einsum``,
  the gradients equal ``torch.autograd.grad`` (float64 / complex128), and the bytes held
  after and during every event equal the replay's;
- on the numpy reference executor: the same gradients, and the same bytes between events.

The floor no plan can go under is the inputs, the upstream gradient and the gradients.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from budgets import examples
from corpus import CASES, corpus_plan, runnable_cases
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from oracle_checks import assert_close, drawn_plan, make_inputs, oracle, small_enough
from strategies import einsum_problems, grad_subsets

from einsum_analyze import parse_equation, plan_contraction
from einsum_analyze.backends.numpy_backend import run_events_numpy
from einsum_analyze.backends.torch_backend import run_schedule
from einsum_analyze.model.planning import Plan
from einsum_analyze.strategies import StrategyResult, build_strategy

ITEMSIZE = {"float64": 8, "complex128": 16}
POLICIES = ("keep-none", "least-peak", "floor", "midpoint")
MAX_INPUT_ELEMENTS = 50_000
MAX_FLOPS = 2 * 10**6


RUNNABLE = runnable_cases(MAX_INPUT_ELEMENTS, MAX_FLOPS, 200_000)


def floor_bytes(plan: Plan, grad: list[int], itemsize: int) -> int:
    eq = plan.equation
    sizes = [math.prod(shape) for shape in eq.shapes]
    output = math.prod(eq.size_dict[c] for c in eq.output)
    return itemsize * (sum(sizes) + output + sum(sizes[k] for k in grad))


def build(plan: Plan, grad: list[int], policy: str | list[int], dtype: str) -> StrategyResult:
    itemsize = ITEMSIZE[dtype]
    copy = dtype.startswith("complex")  # the seed copies a complex upstream gradient
    if isinstance(policy, list):
        options: dict[str, object] = {"keep": policy}
    elif policy == "keep-none":
        options = {"keep": []}
    elif policy == "least-peak":
        options = {}
    else:
        floor = floor_bytes(plan, grad, itemsize)
        if policy == "floor":
            options = {"budget_bytes": floor}
        else:
            reverse = build_strategy("reverse", plan, grad, itemsize=itemsize,
                                     upstream_copy=copy)
            options = {"budget_bytes": max(1, (floor + reverse.memory.peak_bytes) // 2)}
    return build_strategy("checkpoint", plan, grad, itemsize=itemsize, options=options,
                          upstream_copy=copy)


def check(text: str, plan: Plan, grad: list[int], policy, *, dtype: str = "float64",
          backend: str = "torch", seed: int = 0) -> StrategyResult:
    """Run the checkpoint schedule of ``policy`` and check it against the oracle."""
    result = build(plan, grad, policy, dtype)
    eq = plan.equation
    operands, upstream = make_inputs(plan, seed, dtype)
    want_output, want_grads = oracle(text, operands, upstream, grad)
    what = f"checkpoint {policy} {dtype} {backend}"
    mem = result.memory
    if backend == "torch":
        run = run_schedule(result.events, operands, upstream.clone(), eq.size_dict)
        assert_close(run.output, want_output, f"{what}: forward output")
        assert sorted(run.gradients) == sorted(grad), f"{what}: the wrong gradients"
        for k in grad:
            assert_close(run.gradients[k], want_grads[k], f"{what}: gradient of operand {k}")
        assert run.live_bytes == mem.live_bytes, f"{what}: held bytes after each event"
        assert run.high_bytes == mem.high_bytes, f"{what}: held bytes at each high point"
    else:
        arrays = {f"in{k}": t.numpy().copy() for k, t in enumerate(operands)}
        live = dict(arrays)
        peak = run_events_numpy(result.events, live, upstream.numpy().copy(), eq.size_dict,
                                exclude={id(a) for a in arrays.values()})
        output = [e.tensor for e in result.events if e.phase == "forward"
                  and e.kind == "alloc"][-1]
        assert_close(torch.from_numpy(np.array(live[output], order="C")), want_output,
                     f"{what}: forward output")
        for k in grad:
            got = torch.from_numpy(np.array(live[f"d{k}"], order="C"))
            assert_close(got, want_grads[k], f"{what}: gradient of operand {k}")
        assert peak == max(mem.live_bytes, default=0) - mem.input_bytes
    section = result.details["checkpoint"]
    assert section["recompute_flops"] == sum(e.flops for e in result.events if e.recompute)
    if section["fits_budget"] is not None:
        assert section["fits_budget"] == (mem.peak_bytes <= section["budget_bytes"])
    return result


# --- the corpus -------------------------------------------------------------------------------


def test_the_corpus_filter_keeps_the_categories():
    assert {case.category for case in RUNNABLE} == {case.category for case in CASES}


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("case", RUNNABLE, ids=str)
def test_corpus_every_operand(case, policy):
    plan = corpus_plan(case)
    check(case.equation, plan, list(range(plan.equation.num_operands)), policy)


@pytest.mark.parametrize("policy", ["keep-none", "midpoint"])
@pytest.mark.parametrize("case", RUNNABLE, ids=str)
def test_corpus_first_operand_and_numpy(case, policy):
    plan = corpus_plan(case)
    check(case.equation, plan, [0], policy)
    check(case.equation, plan, list(range(plan.equation.num_operands)), policy,
          backend="numpy")


@pytest.mark.parametrize("case", RUNNABLE, ids=str)
def test_corpus_complex(case):
    # A recomputed forward step must not conjugate what it reads; the gradients must.
    plan = corpus_plan(case)
    grad = list(range(plan.equation.num_operands))
    check(case.equation, plan, grad, "keep-none", dtype="complex128")
    check(case.equation, plan, grad, "keep-none", dtype="complex128", backend="numpy")


def test_tn18_midpoint_runs_and_recomputes():
    case = next(case for case in CASES if case.name == "tn18-b512")
    plan = plan_contraction(parse_equation(case.equation, case.shapes), "dp")
    result = check(case.equation, plan, list(range(18)), "midpoint")
    assert result.details["checkpoint"]["recompute_flops"] > 0


# --- hypothesis -------------------------------------------------------------------------------

@settings(deadline=None, max_examples=examples(60))
@given(problem=einsum_problems(max_operands=6, ellipsis=False), data=st.data())
def test_random_equations(problem, data):
    plan, grad = drawn_plan(problem, data)
    intermediates = [step.output for step in plan.steps[:-1]]
    policy = data.draw(
        st.one_of(st.sampled_from(POLICIES),
                  st.lists(st.sampled_from(intermediates), unique=True)
                  if intermediates else st.sampled_from(POLICIES)),
        label="policy",
    )
    dtype = data.draw(st.sampled_from(["float64", "complex128"]), label="dtype")
    backend = data.draw(st.sampled_from(["torch", "numpy"]), label="backend")
    check(problem.equation, plan, grad, policy, dtype=dtype, backend=backend,
          seed=data.draw(st.integers(0, 99)))


@settings(deadline=None, max_examples=examples(30))
@given(problem=einsum_problems(min_operands=3, max_operands=6, ellipsis=True), data=st.data())
def test_random_equations_with_ellipsis_every_policy(problem, data):
    eq = parse_equation(problem.equation, problem.shapes)
    plan = plan_contraction(eq)
    assume(small_enough(plan) and len(plan.steps) >= 2)
    grad = data.draw(grad_subsets(eq.num_operands), label="grad")
    for policy in POLICIES:
        check(problem.equation, plan, grad, policy)
