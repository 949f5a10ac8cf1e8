"""THE ORACLE: every strategy's schedule, run event by event, against torch autograd.

For every corpus case and every strategy, with every operand, the first operand only, or
no operand differentiated: run the strategy's schedule with the torch executor in float64
on CPU and check

- the forward output equals ``torch.einsum`` of the user's text;
- every gradient equals ``torch.autograd.grad`` of ``torch.einsum`` (float64);
- the executor's bytes after every event equal the replay's ``live_bytes``, and at every
  event's high point its ``high_bytes`` (exactly: the executor allocates what the
  lowering says and nothing else).

The numpy reference executor runs the reverse schedules too. Then hypothesis draws
random equations with 1 to 6 operands, repeated, private and size-1 broadcast labels and
random grad subsets, with the same checks.
"""

from __future__ import annotations

import math
from unittest import mock

import numpy as np
import pytest
import torch
from budgets import examples
from corpus import CASES, corpus_plan, runnable_cases
from hypothesis import assume, event, find, given, settings
from hypothesis import strategies as st
from strategies import EinsumProblem, einsum_problems, grad_subsets

import einsum_analyze.strategies.gradient_plans as strategies_module
from einsum_analyze import parse_equation, plan_contraction
from einsum_analyze.backends.numpy_backend import run_events_numpy
from einsum_analyze.backends.torch_backend import run_schedule
from einsum_analyze.model.equation import Equation
from einsum_analyze.model.planning import Plan
from einsum_analyze.strategies import (
    STRATEGIES,
    StrategyResult,
    build_strategy,
    plan_gradients,
)

ITEMSIZE = 8  # float64

# "independent-tree": the independent strategy with its cores on the re-rooted forward
# tree (what networks above LARGE_NETWORK operands get), forced on small cases.
VARIANTS = ("reverse", "independent", "independent-tree", "torch-autograd")
GRADS = ("all", "first", "none")

# The corpus is run in full, but for the bench cases too large for a test: a training
# step on tn18-b512 (1e7 forward FLOPs, 1.3e6-element intermediates) is the largest kept.
MAX_INPUT_ELEMENTS = 200_000
MAX_FLOPS = 2 * 10**7


RUNNABLE = runnable_cases(MAX_INPUT_ELEMENTS, MAX_FLOPS, 2 * 10**6)


def grad_set(which: str, num_operands: int) -> list[int]:
    return {"all": list(range(num_operands)), "first": [0][:num_operands], "none": []}[which]


def build(variant: str, plan: Plan, grad: list[int]) -> StrategyResult:
    eq = plan.equation
    if variant == "independent":
        gradients = plan_gradients(eq, grad, "auto")
        return build_strategy("independent", plan, grad, itemsize=ITEMSIZE, gradients=gradients)
    if variant == "independent-tree":
        with mock.patch.object(strategies_module, "LARGE_NETWORK", 0):
            gradients = plan_gradients(eq, grad, "auto", forward=plan)
        assert gradients.optimizer == "forward-tree"
        return build_strategy("independent", plan, grad, itemsize=ITEMSIZE, gradients=gradients)
    return build_strategy(variant, plan, grad, itemsize=ITEMSIZE)


def make_inputs(eq: Equation, seed: int) -> tuple[list[torch.Tensor], torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    operands = [torch.randn(shape, generator=generator, dtype=torch.float64)
                for shape in eq.shapes]
    upstream = torch.randn([eq.size_dict[c] for c in eq.output], generator=generator,
                           dtype=torch.float64)
    return operands, upstream


def oracle(text: str, operands, upstream, grad):
    """torch.einsum of the user's text and its gradients by torch.autograd (float64)."""
    leaves = [t.detach().clone().requires_grad_(k in grad) for k, t in enumerate(operands)]
    with torch.enable_grad():
        output = torch.einsum(text, *leaves)
        grads = (torch.autograd.grad(output, [leaves[k] for k in grad],
                                     upstream.reshape(output.shape))
                 if grad else ())
    return output.detach(), dict(zip(grad, grads, strict=True))


def assert_close(got, want, what: str) -> None:
    assert tuple(got.shape) == tuple(want.shape), what
    scale = float(want.abs().max()) if want.numel() else 0.0
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12 * max(scale, 1.0),
                               msg=lambda m: f"{what}: {m}")


def check(text: str, plan: Plan, variant: str, grad: list[int], seed: int = 0) -> None:
    """Run the variant's schedule on real tensors and check values and memory."""
    eq = plan.equation
    result = build(variant, plan, grad)
    operands, upstream = make_inputs(eq, seed)
    want_output, want_grads = oracle(text, operands, upstream, grad)
    run = run_schedule(result.events, operands, upstream.clone(), eq.size_dict)

    assert_close(run.output, want_output, f"{variant} forward output")
    assert sorted(run.gradients) == sorted(grad), f"{variant} returned the wrong gradients"
    for k in grad:
        assert_close(run.gradients[k], want_grads[k], f"{variant} gradient of operand {k}")

    mem = result.memory
    assert len(run.live_bytes) == len(result.events)
    # torch takes the diagonal of a single operand (ii->i) as a view that owns no storage;
    # our executor, running the model's schedule, can only copy it.
    is_diagonal_view = variant == "torch-autograd" and eq.num_operands == 1 and any(
        len(set(term)) < len(term) for term in eq.terms)
    if not is_diagonal_view:
        assert run.live_bytes == mem.live_bytes, f"{variant}: held bytes after each event"
    if variant != "torch-autograd":  # unlowered: torch.einsum's temporaries are its own
        assert run.high_bytes == mem.high_bytes, f"{variant}: held bytes at each high point"
    if not is_diagonal_view:
        assert max(run.high_bytes, default=mem.input_bytes) <= mem.peak_bytes
    # The operands were not written to.
    again, _ = make_inputs(eq, seed)
    for k, (before, after) in enumerate(zip(again, operands, strict=True)):
        assert torch.equal(before, after), f"{variant} wrote into operand {k}"


def check_numpy(text: str, plan: Plan, grad: list[int], seed: int = 0) -> None:
    """The numpy reference executor on the reverse schedule."""
    eq = plan.equation
    result = build("reverse", plan, grad)
    operands, upstream = make_inputs(eq, seed)
    want_output, want_grads = oracle(text, operands, upstream, grad)
    arrays = {f"in{k}": t.numpy().copy() for k, t in enumerate(operands)}
    live = dict(arrays)
    peak = run_events_numpy(result.events, live, upstream.numpy().copy(), eq.size_dict,
                            exclude={id(a) for a in arrays.values()})
    output_name = [e.tensor for e in result.events
                   if e.phase == "forward" and e.kind == "alloc"][-1]
    got = torch.from_numpy(np.array(live[output_name], order="C"))
    assert_close(got, want_output, "numpy forward output")
    for k in grad:
        got = torch.from_numpy(np.array(live[f"d{k}"], order="C"))
        assert_close(got, want_grads[k], f"numpy gradient of operand {k}")
    # Between events numpy holds what the replay says (its in-call temporaries aside).
    assert peak == max(result.memory.live_bytes, default=0) - result.memory.input_bytes


# --- the corpus -----------------------------------------------------------------------------


def test_corpus_filter_keeps_the_categories():
    assert {case.category for case in RUNNABLE} == {case.category for case in CASES}
    assert "tn18-b512" in {case.name for case in RUNNABLE}


# Without a gradient, "independent-tree" is "independent": not repeated.
COMBINATIONS = [
    (variant, which)
    for variant in VARIANTS
    for which in GRADS
    if not (variant == "independent-tree" and which == "none")
]


@pytest.mark.parametrize(("variant", "which"), COMBINATIONS,
                         ids=[f"{v}-{w}" for v, w in COMBINATIONS])
@pytest.mark.parametrize("case", RUNNABLE, ids=str)
def test_corpus_against_torch_autograd(case, variant, which):
    plan = corpus_plan(case)
    check(case.equation, plan, variant, grad_set(which, plan.equation.num_operands))


@pytest.mark.parametrize("which", ["all", "first"])
@pytest.mark.parametrize("case", RUNNABLE, ids=str)
def test_corpus_numpy_backend(case, which):
    plan = corpus_plan(case)
    grad = grad_set(which, plan.equation.num_operands)
    check_numpy(case.equation, plan, grad)


@pytest.mark.parametrize("optimizer", ["dp", "greedy"])
def test_tn18_parameters_only(optimizer):
    # The grad set of docs/method.md section 8: only the 9 parameters (operands 9 to 17).
    case = next(case for case in CASES if case.name == "tn18-b512")
    plan = plan_contraction(parse_equation(case.equation, case.shapes), optimizer)
    check(case.equation, plan, "reverse", list(range(9, 18)))


# --- hypothesis -----------------------------------------------------------------------------

# No '...' here: the corpus has those, and random ellipsis problems mostly re-test parsing.
PROBLEMS = einsum_problems(max_operands=6, ellipsis=False)
SMALL = 4096  # elements: the largest tensor a drawn problem may make


def features(problem: EinsumProblem, eq: Equation) -> set[str]:
    """The kinds of index the drawn problem has (the oracle must see every kind)."""
    found = set()
    if problem.repeats_a_label:
        found.add("repeated")
    counts = {label: sum(label in term for term in eq.terms) for label in eq.size_dict}
    private = {label for label, n in counts.items() if n == 1 and label not in eq.output}
    if any(eq.size_dict[label] > 1 for label in private):
        found.add("private")
    # A size-1 dimension against a larger one: normalised to a fresh size-1 label.
    lhs = problem.equation.split("->")[0].replace("...", "")
    sizes: dict[str, set[int]] = {}
    for term, shape in zip(lhs.split(","), problem.shapes, strict=False):
        letters = [char for char in term if char.isalpha()]
        if len(letters) == len(shape):  # no '...' in this term
            for label, size in zip(letters, shape, strict=True):
                sizes.setdefault(label, set()).add(size)
    if any(1 in seen and len(seen) > 1 for seen in sizes.values()):
        found.add("broadcast")
    return found


def small_enough(plan: Plan) -> bool:
    eq = plan.equation
    joint = max(math.prod(eq.size_dict[c] for c in set("".join(step.input_terms)))
                for step in plan.steps)
    event(f"operands: {eq.num_operands}")
    if joint > SMALL:
        event("too large: not run")
    return joint <= SMALL


@settings(deadline=None)
@given(problem=PROBLEMS, data=st.data())
def test_random_equations_against_torch_autograd(problem: EinsumProblem, data):
    eq = parse_equation(problem.equation, problem.shapes)
    plan = plan_contraction(eq)
    assume(small_enough(plan))
    for feature in sorted(features(problem, eq)):
        event(feature)
    grad = data.draw(grad_subsets(eq.num_operands), label="grad")
    variant = data.draw(st.sampled_from(VARIANTS), label="strategy")
    check(problem.equation, plan, variant, grad, seed=data.draw(st.integers(0, 99)))


@settings(deadline=None)
@given(problem=einsum_problems(max_operands=6), data=st.data())
def test_random_equations_all_strategies_same_gradients(problem: EinsumProblem, data):
    # With '...': every strategy on one drawn grad set, each against the oracle.
    eq = parse_equation(problem.equation, problem.shapes)
    plan = plan_contraction(eq, data.draw(st.sampled_from(["greedy", "optimal"])))
    assume(small_enough(plan))
    for feature in sorted(features(problem, eq)):
        event(feature)
    grad = data.draw(grad_subsets(eq.num_operands), label="grad")
    for variant in VARIANTS:
        check(problem.equation, plan, variant, grad)


def test_every_strategy_is_checked_against_the_oracle():
    # A strategy added to the package without a place in VARIANTS would go unchecked.
    assert set(STRATEGIES) <= set(VARIANTS)


@pytest.mark.parametrize("feature", ["repeated", "private", "broadcast"])
def test_the_generator_draws_every_kind_of_index(feature):
    # The random tests above see repeated labels, labels private to one operand (size
    # above 1) and size-1 dimensions broadcast against larger ones, small enough to run.
    def has(problem: EinsumProblem) -> bool:
        eq = parse_equation(problem.equation, problem.shapes)
        return feature in features(problem, eq) and small_enough(plan_contraction(eq))

    found = find(PROBLEMS, has, settings=settings(max_examples=2000, derandomize=True,
                                                    database=None))
    assert feature in features(found, parse_equation(found.equation, found.shapes))


@settings(deadline=None, max_examples=examples(30))
@given(problem=PROBLEMS, data=st.data())
def test_random_equations_numpy_backend(problem: EinsumProblem, data):
    eq = parse_equation(problem.equation, problem.shapes)
    plan = plan_contraction(eq)
    assume(small_enough(plan))
    check_numpy(problem.equation, plan, data.draw(grad_subsets(eq.num_operands)))
