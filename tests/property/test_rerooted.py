"""The re-rooted gradient cores built from shared pieces equal the old, one-by-one build.

Issue 10 item 8: the independent strategy on large networks plans each operand's core by
re-rooting the forward tree. It used to build every core from its text (an opt_einsum
ssa path, then ``Plan.from_path``) and every core's events one by one, quadratic in the
operands with a large constant. :class:`~einsum_analyze.strategies.rerooted.RerootedTree`
and the shared events must give the same plans (paths, steps, FLOPs, sizes) and the same
schedule (kernels, FLOPs, memory replay, tensor names aside) as that old algorithm,
reproduced here as the reference.
"""

from __future__ import annotations

import random

import pytest
from corpus import CASES
from hypothesis import assume, given
from hypothesis import strategies as st
from opt_einsum.paths import ssa_to_linear
from opt_einsum.testing import rand_equation
from strategies import einsum_problems

import einsum_analyze.model.kernels as kernels_module
import einsum_analyze.strategies.gradient_plans as gradient_plans_module
from einsum_analyze import analyze, parse_equation
from einsum_analyze.model.gradients import derive_gradients
from einsum_analyze.model.lowering import lower_events
from einsum_analyze.model.memory import (
    forward_schedule,
    input_elements,
    simulate_memory,
    tensor_name,
)
from einsum_analyze.model.planning import Plan, plan_contraction
from einsum_analyze.strategies import build_strategy, plan_gradients
from einsum_analyze.strategies.common import ScheduleBuilder
from einsum_analyze.strategies.rerooted import RerootedTree

OPTIMIZERS = ("greedy", "random-greedy", "branch-2", "dp")


def old_rerooted_path(forward: Plan, operand: int) -> list[tuple[int, ...]]:
    """The old algorithm: the core's ssa path, converted by opt_einsum."""
    num_ops = forward.equation.num_operands
    holds = {k: k == operand for k in range(num_ops)}
    for step in forward.steps:
        holds[step.output] = any(holds[i] for i in step.inputs)
    ids = {j: (j + 1 if j < operand else j) for j in range(num_ops) if j != operand}
    next_id = num_ops
    ssa: list[tuple[int, ...]] = []
    for step in forward.steps:
        if not holds[step.output]:
            ssa.append(tuple(ids[i] for i in step.inputs))
            ids[step.output] = next_id
            next_id += 1
    accumulated = 0
    for step in reversed(forward.steps):
        if holds[step.output]:
            siblings = tuple(ids[i] for i in step.inputs if not holds[i])
            ssa.append((accumulated, *siblings))
            accumulated = next_id
            next_id += 1
    return [tuple(int(p) for p in c) for c in ssa_to_linear(ssa)]


def old_independent(plan: Plan, gradients, itemsize: int):
    """The old builder: every core's events one by one through ScheduleBuilder.gradient."""
    num_ops = plan.equation.num_operands
    builder = ScheduleBuilder(plan.equation.size_dict)
    builder.events.extend(forward_schedule(plan))
    output = plan.equation.output
    builder.alloc("G", output, op="seed", equation=f"->{output}")
    last = len(gradients.specs) - 1
    consumed = False
    for number, (spec, core) in enumerate(zip(gradients.specs, gradients.plans, strict=True)):
        sources = ["G" if src < 0 else tensor_name(src, num_ops) for src in spec.core_sources]
        consumed = builder.gradient(
            steps=core.steps, num_sources=core.equation.num_operands, sources=sources,
            target=f"d{spec.operand}", target_term=spec.term, operand=spec.operand,
            prefix=f"c{spec.operand}.", can_consume=number == last)
    if not consumed:
        builder.free("G", output)
    eq = plan.equation
    events = lower_events(tuple(builder.events), eq.terms, eq.size_dict)
    memory = simulate_memory(events, input_elements=input_elements(plan),
                             output_elements=plan.steps[-1].output_elements, itemsize=itemsize)
    return events, memory, builder.operand_flops


def check_against_old(equation, shapes, optimizer: str, grad) -> None:
    eq = parse_equation(equation, shapes)
    plan = plan_contraction(eq, optimizer)
    tree = RerootedTree(plan)
    for spec in derive_gradients(eq, range(eq.num_operands)):
        old = Plan.from_path(spec.core(eq), old_rerooted_path(plan, spec.operand),
                             optimizer="forward-tree")
        new = tree.core_plan(spec, "forward-tree")
        assert new == old
        assert new.steps == old.steps
        assert dict(new.equation.size_dict) == dict(old.equation.size_dict)
    gradients = plan_gradients(eq, grad, optimizer, forward=plan)
    if gradients.optimizer != "forward-tree":
        return
    new = build_strategy("independent", plan, grad, itemsize=8, gradients=gradients)
    events, memory, operand_flops = old_independent(plan, gradients, 8)

    def shape(schedule):
        return [(e.kind, e.elements, e.phase, e.op, e.equation, e.view, e.flops, e.kernel,
                 e.workspace) for e in schedule]

    assert shape(new.events) == shape(events)
    assert new.memory.live_bytes == memory.live_bytes
    assert new.memory.high_bytes == memory.high_bytes
    assert (new.memory.peak_bytes, new.memory.retained_bytes, new.memory.peak_event) == (
        memory.peak_bytes, memory.retained_bytes, memory.peak_event)
    assert new.backward_flops == sum(e.flops for e in events if e.phase == "backward")
    assert dict(new.operand_flops) == {k: operand_flops.get(k, 0) for k in grad}


@pytest.fixture
def always_rerooted(monkeypatch):
    monkeypatch.setattr(gradient_plans_module, "LARGE_NETWORK", 0)


@pytest.mark.parametrize("seed", range(40))
def test_random_networks_match_the_old_algorithm(seed, always_rerooted):
    rng = random.Random(seed)
    n = rng.randint(2, 14)
    equation, shapes = rand_equation(n, rng.randint(2, 4), seed=seed, d_min=1, d_max=3,
                                     n_out=rng.randint(0, 3))
    grad = sorted(rng.sample(range(n), rng.randint(1, n)))
    check_against_old(equation, shapes, OPTIMIZERS[seed % len(OPTIMIZERS)], grad)


@pytest.mark.parametrize(
    "case", [c for c in CASES if len(c.shapes) >= 2 and sum(map(len, c.shapes)) < 120],
    ids=str)
def test_corpus_matches_the_old_algorithm(case, always_rerooted):
    check_against_old(case.equation, case.shapes, "greedy", list(range(len(case.shapes))))


@given(problem=einsum_problems(min_operands=2, max_operands=6), data=st.data())
def test_drawn_problems_match_the_old_algorithm(problem, data):
    assume(len(problem.shapes) >= 2)
    grad = data.draw(st.lists(st.integers(0, len(problem.shapes) - 1), min_size=1,
                              unique=True))
    original = gradient_plans_module.LARGE_NETWORK
    gradient_plans_module.LARGE_NETWORK = 0
    try:
        check_against_old(problem.equation, problem.shapes, "greedy", sorted(grad))
    finally:
        gradient_plans_module.LARGE_NETWORK = original


def test_large_networks_lower_each_shared_step_once(monkeypatch):
    # Quadratic work was the cost: 200 operands lowered about 40,000 contractions.
    calls = []
    real = kernels_module.lower_contraction

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(kernels_module, "lower_contraction", counting)
    n = 200
    equation, shapes = rand_equation(n, 3, seed=0, d_min=2, d_max=8)
    report = analyze(equation, shapes, strategies=["independent"])
    assert report.gradients is not None and report.gradients.optimizer == "forward-tree"
    assert 0 < len(calls) < 10 * n

