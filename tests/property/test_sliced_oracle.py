"""The sliced strategy's schedules, run on real tensors, against torch autograd.

For corpus cases and hypothesis-drawn equations (repeated, private and size-1 broadcast
labels), with every operand, the first, or a drawn subset differentiated, each slicing
policy (an output index, a repeated index, a summed index, two indices at once, uneven
chunks), fused and unfused, with the reverse and the checkpoint per-slice strategies:

- on the torch executor, in float64 and complex128: the output equals ``torch.einsum``,
  the gradients equal ``torch.autograd.grad``, and the bytes held after and during every
  event equal the replay's;
- on the numpy reference executor: the same gradients;
- any partition of the slices (:func:`run_slices` on each part) sums to the whole;
- through ``execute`` on the cpu, the allocator's peak (torch.profiler) equals the
  prediction.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from budgets import examples
from corpus import CASES, corpus_plan, runnable_cases
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from oracle_checks import assert_close, make_inputs, oracle, small_enough
from strategies import einsum_problems, grad_subsets

from einsum_analyze import analyze, execute, parse_equation, plan_contraction
from einsum_analyze.backends.numpy_backend import run_events_numpy
from einsum_analyze.backends.torch_backend import run_schedule
from einsum_analyze.model.planning import Plan
from einsum_analyze.slicing import SlicePlan, run_slices
from einsum_analyze.strategies import StrategyResult, build_strategy

ITEMSIZE = {"float64": 8, "complex128": 16}
POLICIES = ("output", "repeated", "summed", "two", "uneven")
RUNNABLE = runnable_cases(50_000, 2 * 10**6, 200_000)


def slicing(plan: Plan, policy: str) -> dict[str, int] | None:
    """Chunk lengths by label for ``policy``; None where the equation has no such index."""
    eq = plan.equation
    sizes = eq.size_dict
    big = [c for c in sizes if sizes[c] > 1]
    repeated = [c for c in big if any(t.count(c) > 1 for t in eq.terms)]
    summed = [c for c in big if c not in eq.output]
    output = [c for c in big if c in eq.output]
    if policy == "output" and output:
        return {output[0]: -(-sizes[output[0]] // 2)}
    if policy == "repeated" and repeated:
        return {repeated[0]: 1}
    if policy == "summed" and summed:
        return {summed[-1]: -(-sizes[summed[-1]] // 2)}
    if policy == "two" and len(big) >= 2:
        return {big[0]: -(-sizes[big[0]] // 2), big[-1]: 1}
    if policy == "uneven":
        odd = [c for c in big if sizes[c] >= 3]
        if odd:
            return {odd[0]: 2 if sizes[odd[0]] % 2 else sizes[odd[0]] - 1}
    return None


def check(text: str, plan: Plan, grad: list[int], chunks: dict[str, int], *,
          dtype: str = "float64", backend: str = "torch", fused: bool = True,
          per_slice: str = "reverse", seed: int = 0) -> StrategyResult:
    """Run the sliced schedule and check it against the oracle and the replay."""
    result = build_strategy("sliced", plan, grad, itemsize=ITEMSIZE[dtype], options={
        "indices": chunks, "fused": fused, "per_slice": per_slice},
        upstream_copy=dtype.startswith("complex"))
    eq = plan.equation
    sizes = result.sizes(eq.size_dict)
    operands, upstream = make_inputs(plan, seed, dtype)
    want_output, want_grads = oracle(text, operands, upstream, grad)
    what = f"sliced {chunks} {per_slice} fused={fused} {dtype} {backend}"
    mem = result.memory
    if backend == "torch":
        run = run_schedule(result.events, operands, upstream.clone(), sizes)
        assert_close(run.output, want_output, f"{what}: forward output")
        assert sorted(run.gradients) == sorted(grad), f"{what}: the wrong gradients"
        for k in grad:
            assert_close(run.gradients[k], want_grads[k], f"{what}: gradient of operand {k}")
        assert run.live_bytes == mem.live_bytes, f"{what}: held bytes after each event"
        assert run.high_bytes == mem.high_bytes, f"{what}: held bytes at each high point"
    else:
        arrays = {f"in{k}": t.numpy().copy() for k, t in enumerate(operands)}
        live = dict(arrays)
        run_events_numpy(result.events, live, upstream.numpy().copy(), sizes)
        for k in grad:
            got = torch.from_numpy(np.array(live[f"d{k}"], order="C"))
            assert_close(got, want_grads[k], f"{what}: gradient of operand {k}")
    section = result.details["slicing"]
    assert section["peak_bytes_with_accumulators"] == mem.peak_bytes, what
    assert section["flops"] == result.forward_flops + result.backward_flops, what
    assert section["copies"] == sum(e.op == "slice_copy" for e in result.events), what
    assert section["count"] == SlicePlan.of(chunks, eq.size_dict).count
    return result


# --- the corpus -------------------------------------------------------------------------------


SLICED = [(case, policy) for case in RUNNABLE for policy in POLICIES
          if slicing(corpus_plan(case), policy) is not None]
ANY = [case for case in RUNNABLE if any(c for c, _ in SLICED if c is case)]


@pytest.mark.parametrize(("case", "policy"), SLICED, ids=lambda v: str(v))
def test_corpus_every_operand(case, policy):
    plan = corpus_plan(case)
    chunks = slicing(plan, policy)
    assert chunks is not None
    grad = list(range(plan.equation.num_operands))
    check(case.equation, plan, grad, chunks)
    check(case.equation, plan, grad, chunks, fused=False)


@pytest.mark.parametrize("case", ANY, ids=str)
def test_corpus_first_operand_checkpoint_complex_numpy(case):
    plan = corpus_plan(case)
    chunks = next(slicing(plan, p) for p in ("two", *POLICIES) if slicing(plan, p))
    assert chunks is not None
    grad = list(range(plan.equation.num_operands))
    check(case.equation, plan, [0], chunks)
    check(case.equation, plan, grad, chunks, per_slice="checkpoint")
    check(case.equation, plan, grad, chunks, dtype="complex128")
    check(case.equation, plan, grad, chunks, dtype="complex128", fused=False)
    check(case.equation, plan, grad, chunks, backend="numpy")
    check(case.equation, plan, grad, chunks, dtype="complex128", backend="numpy")
    check(case.equation, plan, [], chunks)


def test_the_corpus_slices_every_policy_and_category():
    assert {policy for _, policy in SLICED} == set(POLICIES)
    assert {case.category for case in ANY} == {case.category for case in RUNNABLE}


@pytest.mark.parametrize("name", ["tn18-b512", "diag-private"])
def test_partitions_sum_to_the_whole(name):
    case = next(case for case in CASES if case.name == name)
    plan = corpus_plan(case)
    eq = plan.equation
    grad = list(range(eq.num_operands))
    chunks = slicing(plan, "two")
    assert chunks is not None
    slices = SlicePlan.of(chunks, eq.size_dict)
    assert slices.count >= 3
    operands, upstream = make_inputs(plan, 1, "float64")
    want_output, want_grads = oracle(case.equation, operands, upstream, grad)
    parts = [list(range(slices.count))[k::3] for k in range(3)]
    runs = [run_slices(plan, slices, operands, upstream, grad, slice_ids=part)
            for part in parts]
    assert_close(sum(r.output for r in runs), want_output, "output")
    for k in grad:
        assert_close(sum(r.gradients[k] for r in runs), want_grads[k], f"gradient {k}")
    # No slice: zero buffers, the unit of the sum.
    empty = run_slices(plan, slices, operands, upstream, grad, slice_ids=[])
    assert not empty.output.any() and not any(g.any() for g in empty.gradients.values())


@pytest.mark.parametrize(("equation", "shapes", "chunks"), [
    ("bc,bd,cm,mdn->bn", [(64, 2), (64, 2), (2, 7), (7, 2, 7)], "n:3"),
    ("bc,bd,cm,mdn->bn", [(64, 2), (64, 2), (2, 7), (7, 2, 7)], "b:24,m:4"),
    ("ijj,k->ik", [(8, 6, 6), (5,)], "j:2"),
    ("ii->", [(16, 16)], "i:5"),
])
@pytest.mark.parametrize("fused", [True, False])
def test_cpu_allocator_peak_equals_the_prediction(equation, shapes, chunks, fused):
    report = analyze(equation, shapes, strategies=["sliced"],
                     strategy_options={"sliced": {"indices": chunks, "fused": fused}})
    ran = execute(report, devices=["cpu"], repeats=1, warmup=0)
    (run,) = [r for r in ran.runs if r.strategy == "sliced"]
    assert run.skipped is None and run.max_grad_error is not None
    assert run.max_grad_error < 1e-5
    assert run.peak_bytes_measured == run.peak_bytes_predicted


# --- hypothesis -------------------------------------------------------------------------------

@settings(deadline=None, max_examples=examples(60))
@given(problem=einsum_problems(max_operands=5, ellipsis=False), data=st.data())
def test_random_equations(problem, data):
    eq = parse_equation(problem.equation, problem.shapes)
    plan = plan_contraction(eq, data.draw(st.sampled_from(["greedy", "optimal"])))
    assume(small_enough(plan))
    big = sorted(c for c in eq.size_dict if eq.size_dict[c] > 1)
    assume(big)
    labels = data.draw(st.lists(st.sampled_from(big), min_size=1, max_size=2, unique=True),
                       label="sliced")
    chunks = {c: data.draw(st.integers(1, eq.size_dict[c]), label=f"chunk {c}")
              for c in labels}
    grad = data.draw(grad_subsets(eq.num_operands), label="grad")
    check(problem.equation, plan, grad, chunks,
          dtype=data.draw(st.sampled_from(["float64", "complex128"]), label="dtype"),
          backend=data.draw(st.sampled_from(["torch", "numpy"]), label="backend"),
          fused=data.draw(st.booleans(), label="fused"),
          per_slice=data.draw(st.sampled_from(["reverse", "checkpoint"]), label="per slice"),
          seed=data.draw(st.integers(0, 99)))
