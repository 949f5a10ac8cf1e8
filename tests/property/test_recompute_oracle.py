"""The recompute strategy's schedules, run on real tensors, against torch autograd.

For corpus cases and hypothesis-drawn equations, with every operand, the first, or a
drawn subset differentiated, and with the greedy choice, nothing recomputed and drawn
sets of candidates. Each schedule runs on the torch executor in float64 and complex128:
the output equals ``torch.einsum``, the gradients equal ``torch.autograd.grad``, and the
bytes held after and during every event equal the replay's. The allocator's measured
peak is checked on mps-layer in tests/unit/strategies/test_recompute.py.
"""

from __future__ import annotations

import pytest
from budgets import examples
from corpus import CASES, corpus_plan, runnable_cases
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from oracle_checks import assert_close, drawn_plan, make_inputs, oracle
from strategies import einsum_problems

from einsum_analyze.backends.torch_backend import run_schedule
from einsum_analyze.model.planning import Plan
from einsum_analyze.strategies import StrategyResult, build_strategy
from einsum_analyze.strategies.recompute import recompute_candidates

ITEMSIZE = {"float64": 8, "complex128": 16}
RUNNABLE = runnable_cases(50_000, 2 * 10**6, 200_000)


def compatible(plan: Plan, wanted: list[int]) -> list[int]:
    """The drawn candidates, in order, each kept if it may join those kept before it."""
    producer = {step.output: step for step in plan.steps}
    reader = {i: step for step in plan.steps for i in step.inputs}
    chosen: list[int] = []
    for i in wanted:
        if any(j in chosen for j in producer[i].inputs) or any(
                i in producer[k].inputs for k in chosen) or any(
                reader[k] is reader[i] for k in chosen):
            continue
        chosen.append(i)
    return chosen


def check(text: str, plan: Plan, grad: list[int], recompute: list[int] | None, *,
          dtype: str = "float64", seed: int = 0,
          depth_first: bool | None = None) -> StrategyResult:
    """Run the recompute schedule and check it against the oracle.

    ``depth_first``: the order of step 2 (None: the strategy's choice, by the peak).
    """
    options: dict[str, object] = {} if recompute is None else {"recompute": recompute}
    if depth_first is not None:
        options["depth_first"] = depth_first
    result = build_strategy("recompute", plan, grad, itemsize=ITEMSIZE[dtype],
                            options=options, upstream_copy=dtype.startswith("complex"))
    operands, upstream = make_inputs(plan, seed, dtype)
    want_output, want_grads = oracle(text, operands, upstream, grad)
    what = f"recompute {recompute} {dtype}"
    run = run_schedule(result.events, operands, upstream.clone(), plan.equation.size_dict)
    assert_close(run.output, want_output, f"{what}: forward output")
    assert sorted(run.gradients) == sorted(grad), f"{what}: the wrong gradients"
    for k in grad:
        assert_close(run.gradients[k], want_grads[k], f"{what}: gradient of operand {k}")
    assert run.live_bytes == result.memory.live_bytes, f"{what}: held bytes after each event"
    assert run.high_bytes == result.memory.high_bytes, f"{what}: held bytes at each high point"
    section = result.details["recompute"]
    assert section["recompute_flops"] == sum(e.flops for e in result.events if e.recompute)
    if recompute is not None:
        assert section["recomputed"] == sorted(recompute if grad else [])
    if depth_first is not None:
        assert section["depth_first"] is depth_first
    return result


def test_the_corpus_filter_keeps_the_categories():
    assert {case.category for case in RUNNABLE} == {case.category for case in CASES}


@pytest.mark.parametrize("case", RUNNABLE, ids=str)
def test_corpus_every_operand(case):
    plan = corpus_plan(case)
    grad = list(range(plan.equation.num_operands))
    chosen = check(case.equation, plan, grad, None)
    every = compatible(plan, list(recompute_candidates(plan, grad)))
    for depth_first in (False, True):
        check(case.equation, plan, grad, every, depth_first=depth_first)
    check(case.equation, plan, [0], None)
    reverse = build_strategy("reverse", plan, grad, itemsize=8)
    # The greedy choice never raises the peak above reverse mode's.
    assert chosen.memory.peak_bytes <= reverse.memory.peak_bytes


@pytest.mark.parametrize("case", RUNNABLE, ids=str)
def test_corpus_complex(case):
    # A recomputed forward step must not conjugate what it reads; the gradients must.
    plan = corpus_plan(case)
    grad = list(range(plan.equation.num_operands))
    every = compatible(plan, list(recompute_candidates(plan, grad)))
    check(case.equation, plan, grad, every, dtype="complex128")


@settings(deadline=None, max_examples=examples(80))
@given(problem=einsum_problems(max_operands=6, ellipsis=False), data=st.data())
def test_random_equations(problem, data):
    plan, grad = drawn_plan(problem, data)
    candidates = list(recompute_candidates(plan, grad))
    assume(candidates)
    drawn = data.draw(st.lists(st.sampled_from(candidates), unique=True, min_size=1),
                      label="recompute")
    dtype = data.draw(st.sampled_from(["float64", "complex128"]), label="dtype")
    seed = data.draw(st.integers(0, 99))
    depth_first = data.draw(st.booleans(), label="depth_first")
    check(problem.equation, plan, grad, compatible(plan, drawn), dtype=dtype, seed=seed,
          depth_first=depth_first)
    check(problem.equation, plan, grad, None, dtype=dtype, seed=seed)
