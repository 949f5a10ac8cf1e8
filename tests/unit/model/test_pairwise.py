"""A step of three or more tensors runs pairwise; the plan keeps the path as planned.

The split follows opt_einsum's ``auto`` path over the wide step's tensors (what
torch.einsum asks opt_einsum for); the plan that runs is pairwise, and the path as
planned keeps opt_einsum's figures (``opt_cost``, the largest intermediate).
"""

from __future__ import annotations

import opt_einsum
import pytest
from budgets import examples
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from strategies import einsum_problems

from einsum_analyze import analyze, parse_equation
from einsum_analyze.backends.relabel import ascii_equation
from einsum_analyze.model.pairwise import is_pairwise, pairwise_path
from einsum_analyze.model.planning import Plan, plan_contraction

BUDGET_EXAMPLE = ("bc,bd,cm,mdn->bn", [(512, 2), (512, 2), (2, 7), (7, 2, 7)])


def test_a_middle_step_of_three_is_split_and_later_steps_keep_their_positions():
    eq = parse_equation("ab,bc,cd,de,ef->af", [(2, 3), (3, 4), (4, 5), (5, 6), (6, 7)])
    path = ((0, 1), (0, 1, 3), (0, 1))  # ab,bc -> ac; cd,de,ac -> ae; ef,ae -> af
    split = pairwise_path(eq, path)
    assert is_pairwise(split) and len(split) == 4
    plan = Plan.from_path(eq, path)
    assert plan.path == split and plan.as_planned.path == path
    # The wide step's result is the last pairwise step's: the final step reads it.
    assert sorted(plan.steps[-1].input_terms) == ["ae", "ef"]
    assert plan.steps[-1].output_term == "af"
    assert pairwise_path(eq, ((0, 1), (0, 1), (0, 1), (0, 1))) == ((0, 1),) * 4


def test_the_split_is_opt_einsums_path_over_the_steps_tensors():
    eq = parse_equation(*BUDGET_EXAMPLE)
    plan = plan_contraction(eq, "auto", memory_limit=1000)
    assert plan.as_planned.path == ((2, 3), (0, 1, 2))
    # bc,bd,cdn: opt_einsum's own path over these three, and its FLOPs, are the split's.
    last = plan.as_planned.steps[-1]
    sizes = eq.size_dict
    shapes = [tuple(sizes[c] for c in term) for term in last.input_terms]
    inner, info = opt_einsum.contract_path(last.equation, *shapes, shapes=True)
    assert len(plan.path) == 1 + len(inner) and plan.path[0] == (2, 3)
    assert plan.flops == plan.steps[0].flops + int(info.opt_cost)
    # The path as planned keeps opt_einsum's figures: its opt_cost for the whole path.
    _, whole = opt_einsum.contract_path(eq.explicit, *eq.shapes, shapes=True,
                                        memory_limit=1000)
    assert plan.user_flops == plan.as_planned.flops == int(whole.opt_cost) == 43_400
    assert plan.flops == 31_112


def test_the_report_keeps_opt_einsums_figures_and_says_what_runs():
    report = analyze(*BUDGET_EXAMPLE, memory_limit=1000, strategies=("reverse",))
    forward = report.to_dict()["forward"]
    assert forward["path"] == [[2, 3], [0, 1, 2]]
    assert forward["flops"] == 43_400
    assert sum(step["flops"] for step in forward["steps"]) == 43_400
    assert forward["largest_intermediate_elements"] == 3584  # bn, the output
    pairwise = forward["pairwise"]
    assert pairwise["path"] == [[2, 3], [0, 1], [0, 1]]
    assert pairwise["flops"] == sum(step["flops"] for step in pairwise["steps"]) == 31_112
    assert pairwise["largest_intermediate_elements"] == 3584
    # The strategies run what runs: reverse's forward FLOPs are the pairwise path's.
    assert report.strategies[0].forward_flops == 31_112
    (note,) = [w for w in report.warnings if "run pairwise" in w]
    assert note == (
        "auto's path for the forward pass: its last step contracts 3 tensors at once "
        "(43,008 FLOPs); run pairwise, as torch.einsum contracts such a step: 31,112 FLOPs "
        "in all (43,400 as planned), largest intermediate (the output aside) 2,048 "
        "elements, over the memory limit of 1,000 elements")


def test_a_pairwise_path_has_no_pairwise_section():
    report = analyze(*BUDGET_EXAMPLE, strategies=None)
    assert report.plan.wide is None
    assert "pairwise" not in report.to_dict()["forward"]
    assert not any("run pairwise" in w for w in report.warnings)


def test_a_wide_explicit_path_runs_pairwise_and_says_so():
    eq = parse_equation("ab,bc,cd->ad", [(2, 30), (30, 4), (4, 50)])
    plan = plan_contraction(eq, [(0, 1, 2)])
    assert plan.path == ((0, 1), (0, 1)) and plan.user_flops == 36_000
    (note,) = plan.warnings
    assert note.startswith("the given path for the forward pass: its last step contracts "
                           "3 tensors at once (36,000 FLOPs); run pairwise")
    assert note.endswith("largest intermediate (the output aside) 8 elements")  # no limit


@given(problem=einsum_problems(min_operands=3, max_operands=5), limit=st.integers(1, 4))
@settings(max_examples=examples(60), deadline=None)
def test_a_split_computes_what_the_wide_step_does(problem, limit):
    torch = pytest.importorskip("torch")
    eq = parse_equation(problem.equation, problem.shapes)
    plan = plan_contraction(eq, "greedy", memory_limit=limit)
    assume(plan.wide is not None)
    assert all(len(step.inputs) <= 2 for step in plan.steps)
    # Step by step, torch.einsum of each pairwise step gives the whole contraction.
    generator = torch.Generator().manual_seed(0)
    live = {k: torch.randn(shape, dtype=torch.float64, generator=generator)
            for k, shape in enumerate(eq.shapes)}
    whole = torch.einsum(ascii_equation(eq.explicit), *live.values())
    for step in plan.steps:
        live[step.output] = torch.einsum(ascii_equation(step.equation),
                                         *(live.pop(i) for i in step.inputs))
    torch.testing.assert_close(live.pop(plan.output_id), whole, rtol=1e-12, atol=1e-12)
    assert live == {}
    # The same path again is split the same way.
    assert Plan.from_path(eq, plan.as_planned.path).path == plan.path


@pytest.mark.parametrize("path", [((0, 1, 2),), ((0, 2, 1),), ((2, 1, 0),)])
def test_the_order_of_a_steps_positions_does_not_matter(path):
    eq = parse_equation("ab,bc,cd->ad", [(2, 30), (30, 4), (4, 50)])
    assert Plan.from_path(eq, path).path == ((0, 1), (0, 1))
