"""The training-aware search: tree costs, exact re-contraction, Pareto front, recommendation."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import opt_einsum.testing
import pytest
from budgets import examples
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from report_schema import validate_report

from einsum_analyze import analyze
from einsum_analyze.errors import PlanningError
from einsum_analyze.model.equation import parse_equation
from einsum_analyze.model.planning import Plan, plan_contraction
from einsum_analyze.search import (
    PlanScore,
    check_objective,
    cotengra_available,
    floor_bytes,
    pareto_front,
    recommend,
    search_plans,
)
from einsum_analyze.search.candidates import candidate_paths, cotengra_path
from einsum_analyze.search.tree import (
    TreeModel,
    _best_over,
    linear_to_tree,
    reconfigure,
    tree_to_linear,
)
from einsum_analyze.strategies import (
    ScheduleBuilder,
    StrategyInput,
    StrategySpec,
    build_strategy,
    register_strategy,
    unregister_strategy,
)
from einsum_analyze.strategies.reverse import reverse_events

CASES = json.loads((Path(__file__).parents[3] / "benchmarks" / "cases.json").read_text())
TN18 = next(c for c in CASES["cases"] if c["name"] == "tn18-b512")
# opt_einsum's dp with outer products on tn18-b512 (1.31e6 FLOPs; 25 to 34 s to find).
DP_OUTER_PATH = [(0, 1), (0, 1), (14, 15), (5, 6), (5, 13), (5, 12), (10, 11), (1, 2), (1, 2),
                 (7, 8), (4, 5), (3, 6), (2, 5), (3, 4), (2, 3), (1, 2), (0, 1)]


def random_equation(n: int, seed: int) -> tuple[str, list[tuple[int, ...]]]:
    eq, shapes = opt_einsum.testing.rand_equation(n, 3, seed=seed, d_min=2, d_max=4,
                                                  n_out=2)
    return eq, [tuple(s) for s in shapes]


@settings(max_examples=examples(40), deadline=None)
@given(n=st.integers(3, 7), seed=st.integers(0, 10_000), grad_bits=st.integers(0, 127))
def test_the_tree_cost_is_reverse_modes_training_flops(n: int, seed: int, grad_bits: int):
    eq_text, shapes = random_equation(n, seed)
    eq = parse_equation(eq_text, shapes)
    plan = plan_contraction(eq, "greedy", None)
    tree = linear_to_tree(plan.path, n)
    assume(tree is not None)
    grad = tuple(k for k in range(n) if grad_bits >> k & 1)
    model = TreeModel(eq, sum(1 << k for k in grad))
    result = build_strategy("reverse", plan, grad, itemsize=4)
    assert model.tree_cost(tree) == result.forward_flops + result.backward_flops


def _all_trees(pieces):
    if len(pieces) == 1:
        yield pieces[0]
        return
    first, rest = pieces[0], pieces[1:]
    for r in range(len(rest)):
        for chosen in itertools.combinations(range(len(rest)), r):
            left = [first, *(rest[i] for i in chosen)]
            right = [rest[i] for i in range(len(rest)) if i not in chosen]
            for a in _all_trees(left):
                for b in _all_trees(right):
                    yield (a, b)


@settings(max_examples=examples(25), deadline=None)
@given(n=st.integers(3, 5), seed=st.integers(0, 10_000), grad_bits=st.integers(1, 31),
       kind=st.sampled_from(["training-flops", "retained"]))
def test_the_subset_program_is_exact_against_brute_force(n, seed, grad_bits, kind):
    eq_text, shapes = random_equation(n, seed)
    eq = parse_equation(eq_text, shapes)
    model = TreeModel(eq, grad_bits & ((1 << n) - 1), kind=kind)
    found = _best_over(list(range(n)), model)
    assert found is not None
    brute = min(model.tree_cost(t) for t in _all_trees(list(range(n))))
    assert found[0] == brute == model.tree_cost(found[1])


@settings(max_examples=examples(25), deadline=None)
@given(n=st.integers(4, 12), seed=st.integers(0, 10_000), limit_scale=st.integers(1, 4))
def test_reconfiguration_never_costs_more_and_keeps_the_limit(n, seed, limit_scale):
    eq_text, shapes = random_equation(n, seed)
    eq = parse_equation(eq_text, shapes)
    largest = max(math.prod(s) for s in shapes)
    limit = largest * limit_scale
    plan = plan_contraction(eq, "greedy", limit)
    tree = linear_to_tree(plan.path, n)
    assume(tree is not None)
    model = TreeModel(eq, (1 << n) - 1, memory_limit=limit)
    assume(model.tree_fits(tree))
    better = reconfigure(tree, model, width=5)
    assert model.tree_cost(better) <= model.tree_cost(tree)
    assert model.tree_fits(better)
    rebuilt = Plan.from_path(eq, tree_to_linear(better, n))
    assert all(step.output_elements <= limit for step in rebuilt.steps[:-1])
    assert rebuilt.flops > 0


def test_tree_and_linear_path_round_trip():
    eq = parse_equation(TN18["equation"], TN18["shapes"])
    plan = Plan.from_path(eq, DP_OUTER_PATH)
    again = Plan.from_path(eq, tree_to_linear(linear_to_tree(plan.path, 18), 18))
    assert again.flops == plan.flops == 1_308_528


def _score(flops: int, peak: int, source: str = "x") -> PlanScore:
    result = analyze("ab,bc->ac", [(2, 3), (3, 4)]).strategies[0]
    return PlanScore(path=((0, 1),), source=source, strategy="reverse", forward_flops=1,
                     training_flops=flops, peak_bytes=peak, retained_bytes=0,
                     largest_intermediate_elements=1, result=result)


@given(st.lists(st.tuples(st.integers(1, 50), st.integers(1, 50)), min_size=1, max_size=30))
def test_the_pareto_front_is_exactly_the_non_dominated_plans(points):
    plans = [_score(f, p) for f, p in points]
    front = pareto_front(plans)
    figures = {(p.training_flops, p.peak_bytes) for p in front}
    for f, p in points:
        dominated = any((g <= f and q <= p) and (g, q) != (f, p) for g, q in points)
        if not dominated:
            assert (f, p) in figures
    for f, p in figures:
        assert not any((g <= f and q <= p) and (g, q) != (f, p) for g, q in points)


def test_tn18_all_operands_flops_beats_reverse_on_dp_with_outer_products():
    eq = parse_equation(TN18["equation"], TN18["shapes"])
    target = build_strategy("reverse", Plan.from_path(eq, DP_OUTER_PATH), range(18), itemsize=4)
    report = analyze(TN18["equation"], TN18["shapes"], objective="flops", max_search_s=None)
    assert report.recommended is not None
    assert report.recommended.plan.training_flops <= target.forward_flops + target.backward_flops


def test_tn18_parameters_memory_beats_reverse_on_greedy_dp_and_dp_outer():
    eq = parse_equation(TN18["equation"], TN18["shapes"])
    grad = range(9, 18)
    peaks = [
        build_strategy("reverse", plan, grad, itemsize=4).memory.peak_bytes
        for plan in (plan_contraction(eq, "greedy", None), plan_contraction(eq, "dp", None),
                     Plan.from_path(eq, DP_OUTER_PATH))
    ]
    report = analyze(TN18["equation"], TN18["shapes"], grad="9-17", objective="memory",
                     max_search_s=None)
    assert report.recommended is not None
    assert report.recommended.plan.peak_bytes <= min(peaks)


def test_recommend_takes_the_best_fitting_plan_or_the_least_peak():
    report = analyze("abc,bd,de,ef->af", [(8, 6, 5), (6, 40), (40, 40), (40, 3)],
                     objective="flops")
    found = report.search
    assert found is not None
    best = recommend(found, None)
    assert best.fits and best.plan == found.training_optimal
    least = found.smallest_peak
    tight = recommend(found, least.peak_bytes)
    assert tight.fits and tight.plan.peak_bytes <= least.peak_bytes
    nothing = recommend(found, least.peak_bytes - 1)
    assert not nothing.fits and nothing.plan == least


def test_the_floor_counts_inputs_upstream_and_returned_gradients():
    eq = parse_equation("ab,bc->ac", [(2, 3), (3, 4)])
    assert floor_bytes(eq, (0,), 4) == (6 + 12 + 8 + 6) * 4
    assert floor_bytes(eq, (), 4) == (6 + 12) * 4


@pytest.mark.parametrize("objective", ["time", "flops", "memory", "balanced"])
def test_every_objective_recommends_a_plan_on_the_front(objective):
    report = analyze("ab,bc,cd,de->ae", [(4, 30), (30, 30), (30, 30), (30, 5)],
                     objective=objective)
    assert report.search is not None and report.recommended is not None
    assert report.recommended.plan in report.search.pareto
    data = report.to_dict()
    validate_report(data)
    assert data["recommended"]["objective"] == objective


@pytest.mark.parametrize("bad", ["0", "-5", "lots", 0, -1, "0B"])
def test_a_budget_that_is_not_a_positive_size_is_an_input_error(bad):
    with pytest.raises(PlanningError, match="budget"):
        analyze("ab,bc->ac", [(2, 3), (3, 4)], budget=bad)


def test_an_unknown_objective_is_an_input_error():
    with pytest.raises(PlanningError, match="unknown objective 'fast'"):
        check_objective("fast")
    with pytest.raises(PlanningError, match="unknown objective"):
        analyze("ab,bc->ac", [(2, 3), (3, 4)], objective="fast")


@pytest.mark.parametrize("bad", ["none,0", "none,-3", "1e6,,max_input", "none,abc"])
def test_a_limit_list_with_a_bad_item_is_an_input_error(bad):
    with pytest.raises(PlanningError):
        analyze("ab,bc->ac", [(2, 3), (3, 4)], memory_limit=bad)


def test_a_limit_sweep_has_one_row_per_limit_each_within_its_limit():
    eq_text, shapes = "abc,bd,de,ef->af", [(8, 6, 5), (6, 40), (40, 40), (40, 3)]
    report = analyze(eq_text, shapes, memory_limit=["none", 100, "1KiB", "max_input"])
    rows = report.memory_limits
    assert [r.limit for r in rows] == ["none", "100", "1KiB", "max_input"]
    assert [r.limit_elements for r in rows] == [None, 100, 256, 1600]
    assert rows[0].path == report.plan.path and report.memory_limit_elements is None
    eq = parse_equation(eq_text, shapes)
    for row in rows:
        assert row.best is not None
        planned = Plan.from_path(eq, row.path).as_planned
        best = Plan.from_path(eq, row.best.path)
        assert best.wide is None  # the recommended path is the one that runs: pairwise
        if row.limit_elements is not None:
            assert all(s.output_elements <= row.limit_elements for s in planned.steps[:-1])
            # Past the limit only where the path as planned has a wide step: it says so.
            if any(s.output_elements > row.limit_elements for s in best.steps[:-1]):
                assert any("run pairwise" in w for w in row.warnings)
        assert {s.name for s in row.strategies} == {s.name for s in report.strategies}
    single = analyze(eq_text, shapes, memory_limit=100)
    assert single.memory_limits == () and single.search is None
    data = report.to_dict()
    validate_report(data)
    assert len(data["memory_limits"]) == 4


def test_a_budget_says_which_strategies_fit():
    report = analyze("abc,bd,de,ef->af", [(8, 6, 5), (6, 40), (40, 40), (40, 3)],
                     budget=10_000)
    summary = report.budget
    assert summary is not None and summary.budget_bytes == 10_000
    for name, peak, fits in summary.strategies:
        strategy = next(s for s in report.strategies if s.name == name)
        assert peak == strategy.memory.peak_bytes and fits == (peak <= 10_000)
    assert report.recommended is not None and report.recommended.objective == "time"
    data = report.to_dict()
    assert [s["fits_budget"] for s in data["strategies"]] == [f for *_, f in summary.strategies]
    validate_report(data)


def test_a_budget_below_the_floor_recommends_the_least_peak_and_warns():
    report = analyze("ab,bc->ac", [(20, 30), (30, 40)], budget=100)
    assert report.recommended is not None and not report.recommended.fits
    assert report.budget is not None and not report.budget.fits
    assert any("no plan fits the training budget of 100 B" in w and "below the floor" in w
               for w in report.warnings)


@pytest.fixture
def budget_aware():
    """A toy strategy with a budget_bytes option; it records the budget it was given."""
    seen: list[object] = []

    def build(given: StrategyInput) -> ScheduleBuilder:
        seen.append(given.options["budget_bytes"])
        return reverse_events(given.plan, given.grad)

    register_strategy(StrategySpec(name="toy-budget", build=build, description="toy",
                                   default=False, options={"budget_bytes": None}))
    yield seen
    unregister_strategy("toy-budget")


def test_a_budget_aware_strategy_receives_the_budget(budget_aware):
    analyze("ab,bc,cd->ad", [(2, 3), (3, 4), (4, 5)], strategies=["reverse", "toy-budget"],
            budget="1KiB")
    assert budget_aware and set(budget_aware) == {1024}
    budget_aware.clear()
    analyze("ab,bc,cd->ad", [(2, 3), (3, 4), (4, 5)], strategies=["toy-budget"])
    assert budget_aware == [None]


def test_the_search_scores_every_strategy_the_executor_runs(budget_aware):
    eq = parse_equation("ab,bc,cd->ad", [(2, 3), (3, 4), (4, 5)])
    found = search_plans(plan_contraction(eq, "auto", None), (0, 1, 2), itemsize=4,
                         objective="memory", budget=4096)
    assert budget_aware and set(budget_aware) == {4096}
    strategies = {p.strategy for p in (found.forward_optimal, found.training_optimal,
                                       found.smallest_peak, *found.pareto)}
    assert "torch-autograd" not in strategies


def test_candidates_include_opt_einsum_random_greedy_and_reconfigured_paths():
    eq = parse_equation(TN18["equation"], TN18["shapes"])
    found = candidate_paths(eq, range(18), forward=plan_contraction(eq, "auto", None),
                            cotengra=False)
    sources = [source for source, _ in found]
    assert sources[0] == "auto"
    assert "dp" in sources
    assert any(s.startswith("reconfigured(") for s in sources)
    assert len({path for _, path in found}) == len(found)


@pytest.mark.skipif(not cotengra_available(), reason="the cotengra extra is not installed")
def test_cotengra_candidates_run_in_process():
    eq = parse_equation(TN18["equation"], TN18["shapes"])
    import random

    state = random.getstate()
    path = cotengra_path(eq, "flops", repeats=4)
    assert random.getstate() == state  # the caller's generator is left as it was
    assert path is not None and path == cotengra_path(eq, "flops", repeats=4)
    assert Plan.from_path(eq, path).flops > 0
    found = dict((p, s) for s, p in candidate_paths(
        eq, range(18), forward=plan_contraction(eq, "auto", None), cotengra=True))
    for target in ("flops", "write", "combo"):
        tree = cotengra_path(eq, target)
        assert tree in found  # its own source, or an equal path found before it
