"""The checkpoint strategy: its schedule, its search, its report, by hand and on tn18-b512.

Hand figures use float64 (8 bytes) and the opt_einsum FLOP convention. The oracle of its
gradients is tests/property/test_checkpoint_oracle.py.
"""

from __future__ import annotations

import itertools
import json
import math

import pytest
from budgets import examples
from corpus import CASES, by_name
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from report_schema import validate_report
from strategies import einsum_problems

import einsum_analyze.strategies.checkpoint as checkpoint_module
import einsum_analyze.strategies.checkpoint_schedule as checkpoint_schedule_module
from einsum_analyze import Plan, PlanningError, analyze, execute, parse_equation, plan_contraction
from einsum_analyze.strategies import build_strategy, get_strategy, strategy_names
from einsum_analyze.strategies.checkpoint import (
    EXACT_LIMIT,
    GREEDY_LIMIT,
    checkpoint_candidates,
    checkpoint_events,
    choose_keep,
    evaluate_keep,
    read_in_backward,
    recompute_counts,
)
from einsum_analyze.strategies.reverse import reverse_events

F64 = 8

# ab,bc,cd,de->ae along the chain ((0, 1), (0, 2), (0, 1)): ids 4 = ca, 5 = ad, 6 = ae.
#   step 0: bc,ab->ca  joint abc = 24, summed:  48 FLOPs,  8 elements
#   step 1: ac,cd->ad  joint acd = 40, summed:  80 FLOPs, 10 elements
#   step 2: ad,de->ae  joint ade = 60, summed: 120 FLOPs, 12 elements
CHAIN4 = ("ab,bc,cd,de->ae", [(2, 3), (3, 4), (4, 5), (5, 6)])
CHAIN4_PATH = ((0, 1), (0, 2), (0, 1))


def chain4() -> Plan:
    return Plan.from_path(parse_equation(*CHAIN4), CHAIN4_PATH)


def tn18(optimizer: str = "dp") -> Plan:
    case = by_name("tn18-b512")
    return plan_contraction(parse_equation(case.equation, case.shapes), optimizer)


def checkpoint(plan: Plan, grad, itemsize: int = F64, **options):
    return build_strategy("checkpoint", plan, list(grad), itemsize=itemsize, options=options)


def floor_bytes(plan: Plan, grad, itemsize: int) -> int:
    """The floor no plan goes under: inputs, the upstream gradient, the gradients."""
    eq = plan.equation
    sizes = [math.prod(shape) for shape in eq.shapes]
    output = math.prod(eq.size_dict[c] for c in eq.output)
    return itemsize * (sum(sizes) + output + sum(sizes[k] for k in grad))


def every_keep(plan: Plan, grad, itemsize: int) -> list[tuple[int, int]]:
    """``(peak, flops)`` of every subset of the candidates, each replayed in full."""
    candidates = checkpoint_candidates(plan, grad)
    return [evaluate_keep(plan, grad, keep, itemsize)
            for size in range(len(candidates) + 1)
            for keep in itertools.combinations(candidates, size)]


def brute_force(plan: Plan, grad, itemsize: int, budget: int | None, replays=None):
    """The best rank over every subset of the candidates (``replays``: their
    :func:`every_keep`, when one call's replays serve several budgets)."""
    best = None
    for peak, flops in replays if replays is not None else every_keep(plan, grad, itemsize):
        if budget is None:
            rank = (0, peak, flops)
        elif peak <= budget:
            rank = (0, flops, peak)
        else:
            rank = (1, peak, flops)
        best = rank if best is None else min(best, rank)
    return best


def rank_of(choice, budget):
    if budget is None:
        return (0, choice.peak_bytes, choice.recompute_flops)
    if choice.peak_bytes <= budget:
        return (0, choice.recompute_flops, choice.peak_bytes)
    return (1, choice.peak_bytes, choice.recompute_flops)


# --- registration ----------------------------------------------------------------------------


def test_checkpoint_is_registered_with_its_options_but_not_modelled_by_default():
    spec = get_strategy("checkpoint")
    assert "checkpoint" in strategy_names()
    assert not spec.default and spec.lowered and not spec.needs_gradient_plans
    assert dict(spec.options) == {"budget_bytes": None, "keep": None, "search": "auto"}
    assert "checkpoint" not in [s.name for s in analyze(*CHAIN4).strategies]


# --- the schedule, by hand -------------------------------------------------------------------


def test_chain_keeping_nothing_recomputes_by_hand():
    plan = chain4()
    assert read_in_backward(plan, [0, 1, 2, 3]) == {4, 5}
    builder = checkpoint_events(plan, [0, 1, 2, 3], keep=[])
    remade = [(e.kind, e.tensor) for e in builder.events if e.phase == "backward"
              and e.tensor in ("x4", "x5")]
    # Step 2 reads ad (x5): made from ca (x4), made again; then step 1 reads ca.
    assert remade == [("alloc", "x4"), ("alloc", "x5"), ("free", "x4"), ("free", "x5"),
                      ("alloc", "x4"), ("free", "x4")]
    assert [e.recompute for e in builder.events if e.kind == "alloc" and e.tensor in
            ("x4", "x5")] == [False, False, True, True, True]
    assert recompute_counts(plan, [0, 1, 2, 3], []) == {4: 2, 5: 1}
    result = checkpoint(plan, range(4), keep=[])
    reverse = build_strategy("reverse", plan, [0, 1, 2, 3], itemsize=F64)
    assert result.details["checkpoint"]["recompute_flops"] == 2 * 48 + 80
    assert result.backward_flops == reverse.backward_flops + 176
    assert result.forward_flops == reverse.forward_flops == 248
    # Forward keeps nothing: the inputs (6 + 12 + 20 + 30) and the output (12) remain.
    assert result.memory.retained_bytes == 0
    assert reverse.memory.retained_bytes == (8 + 10) * F64


def test_chain_keeping_the_top_recomputes_only_below_it():
    plan = chain4()
    result = checkpoint(plan, range(4), keep=[5])
    section = result.details["checkpoint"]
    assert section["search"] == "given"
    assert section["kept"] == [{"id": 5, "term": "ad", "bytes": 80}]
    assert section["recomputed"] == [{"id": 4, "term": "ca", "bytes": 64, "times": 1,
                                      "flops": 48}]
    assert section["recompute_flops"] == 48
    assert result.memory.retained_bytes == 80


def test_only_the_operands_that_need_a_gradient_are_paid_for():
    plan = chain4()
    # Only operand 3 (de): step 2 reads ad; ad is recomputed from ac, ac from ab, bc.
    assert read_in_backward(plan, [3]) == {5}
    assert checkpoint_candidates(plan, [3]) == (4, 5)
    assert recompute_counts(plan, [3], []) == {5: 1, 4: 1}
    assert recompute_counts(plan, [3], [4]) == {5: 1}
    # Only operand 0: nothing is read, nothing to decide; checkpoint is reverse.
    assert read_in_backward(plan, [0]) == frozenset()
    result = checkpoint(plan, [0])
    assert result.events == build_strategy("reverse", plan, [0], itemsize=F64).events
    assert result.details["checkpoint"]["search"] == "none"


def test_without_gradients_nothing_is_kept_or_recomputed():
    plan = chain4()
    result = checkpoint(plan, [], keep=[4, 5])
    assert all(e.phase == "forward" for e in result.events)
    assert result.details["checkpoint"]["kept"] == []
    assert result.details["checkpoint"]["recompute_flops"] == 0


def small_plans():
    for case in CASES:
        if case.input_elements > 5000:
            continue
        plan = plan_contraction(parse_equation(case.equation, case.shapes))
        if plan.largest_intermediate_elements <= 5000 and plan.flops <= 10**6:
            yield case.name, plan


SMALL = list(small_plans())


@pytest.mark.parametrize(("name", "plan"), SMALL, ids=[name for name, _ in SMALL])
def test_keeping_what_reverse_keeps_is_reverse_event_for_event(name, plan):
    n = plan.equation.num_operands
    for grad in (range(n), [0], [n - 1], []):
        grad = frozenset(grad)
        read = read_in_backward(plan, grad)
        assert checkpoint_events(plan, grad, read).events == reverse_events(plan, grad).events


@pytest.mark.parametrize(("name", "plan"), SMALL, ids=[name for name, _ in SMALL])
def test_recompute_flops_are_the_recomputed_steps(name, plan):
    n = plan.equation.num_operands
    grad = list(range(n))
    reverse = build_strategy("reverse", plan, grad, itemsize=F64)
    intermediates = [step.output for step in plan.steps[:-1]]
    for keep in ([], intermediates[::2], intermediates[1::2]):
        result = checkpoint(plan, grad, keep=keep)
        remade = [e for e in result.events if e.recompute]
        flops = result.details["checkpoint"]["recompute_flops"]
        assert flops == sum(e.flops for e in remade)
        assert flops == sum(item["flops"] for item in result.details["checkpoint"]["recomputed"])
        assert result.backward_flops == reverse.backward_flops + flops
        assert sum(result.operand_flops.values()) + result.shared_flops + flops == (
            result.backward_flops)
        assert all(e.phase == "backward" and e.op == "contract" for e in remade)


# --- the search ------------------------------------------------------------------------------


def test_a_budget_at_reverse_peak_is_reverse_with_no_recompute():
    for plan in (chain4(), tn18("dp"), tn18("greedy")):
        grad = range(plan.equation.num_operands)
        reverse = build_strategy("reverse", plan, list(grad), itemsize=4)
        for budget in (reverse.memory.peak_bytes, 10 * reverse.memory.peak_bytes):
            result = checkpoint(plan, grad, itemsize=4, budget_bytes=budget)
            assert result.details["checkpoint"]["recompute_flops"] == 0
            assert result.details["checkpoint"]["fits_budget"] is True
            assert result.memory.peak_bytes == reverse.memory.peak_bytes
            assert result.backward_flops == reverse.backward_flops
            # Not merely the same figures: reverse mode's schedule, event for event.
            kept = {item["id"] for item in result.details["checkpoint"]["kept"]}
            assert kept == read_in_backward(plan, grad)
            assert result.events == reverse.events


def test_a_tighter_budget_lowers_the_peak_and_raises_the_recompute():
    plan = tn18("dp")
    grad = range(18)
    reverse = build_strategy("reverse", plan, list(grad), itemsize=4).memory.peak_bytes
    least = checkpoint(plan, grad, itemsize=4)  # no budget: the least peak
    assert least.memory.peak_bytes < reverse
    budgets = [reverse - (reverse - least.memory.peak_bytes) * k // 4 for k in range(5)]
    results = [checkpoint(plan, grad, itemsize=4, budget_bytes=b) for b in budgets]
    peaks = [r.memory.peak_bytes for r in results]
    flops = [r.details["checkpoint"]["recompute_flops"] for r in results]
    assert all(r.details["checkpoint"]["fits_budget"] for r in results)
    assert all(p <= b for p, b in zip(peaks, budgets, strict=True))
    assert flops == sorted(flops) and flops[0] == 0 < flops[-1]
    assert peaks[-1] == least.memory.peak_bytes < peaks[0] == reverse
    # Exact: the least recompute that fits can only grow as the budget shrinks.
    assert all(r.details["checkpoint"]["search"] == "exact" for r in results)


def test_below_the_least_peak_it_says_it_does_not_fit():
    plan = tn18("dp")
    least = checkpoint(plan, range(18), itemsize=4).memory.peak_bytes
    result = checkpoint(plan, range(18), itemsize=4, budget_bytes=least - 1)
    section = result.details["checkpoint"]
    assert section["fits_budget"] is False
    assert result.memory.peak_bytes == least
    assert result.warnings == (
        f"checkpoint: no choice of intermediates to keep fits the budget of {least - 1:,} "
        f"bytes (inputs included); the least training peak it can reach is {least:,} bytes",
    )


@settings(max_examples=examples(25), deadline=None)
@given(problem=einsum_problems(min_operands=3, max_operands=6, ellipsis=False),
       data=st.data())
def test_the_exact_search_equals_brute_force(problem, data):
    plan = plan_contraction(parse_equation(problem.equation, problem.shapes))
    n = plan.equation.num_operands
    grad = data.draw(st.sets(st.integers(0, n - 1), min_size=1), label="grad")
    candidates = checkpoint_candidates(plan, grad)
    assume(1 <= len(candidates) <= 5)
    replays = every_keep(plan, grad, F64)
    least = brute_force(plan, grad, F64, None, replays)
    reverse = build_strategy("reverse", plan, sorted(grad), itemsize=F64).memory.peak_bytes
    floor = floor_bytes(plan, grad, F64)
    budgets = [None, least[1], (least[1] + reverse) // 2, reverse, floor, least[1] - 1]
    for budget in budgets:
        best = brute_force(plan, grad, F64, budget, replays)
        choice = choose_keep(plan, grad, F64, budget, search="exact")
        assert choice.complete
        assert rank_of(choice, budget) == best, budget
        for heuristic in ("greedy", "largest-first"):
            guess = choose_keep(plan, grad, F64, budget, search=heuristic)
            # What a heuristic says of its set is its set's replay, and no better than best.
            assert evaluate_keep(plan, grad, guess.keep, F64) == (
                guess.peak_bytes, guess.recompute_flops)
            assert guess.fits == (None if budget is None else guess.peak_bytes <= budget)
            assert rank_of(guess, budget) >= best


# Two trees of 10 operands (8 intermediates: 256 keep-sets), on two paths each.
TREES = [
    ("chain10", ",".join(f"{a}{b}" for a, b in itertools.pairwise("abcdefghijk")) + "->ak",
     [(3, 4), (4, 5), (5, 3), (3, 6), (6, 2), (2, 5), (5, 4), (4, 3), (3, 5), (5, 2)]),
    ("tn10", "bc,bd,be,bf,bg,cm,mdn,neo,ofp,pgq->bq",
     [(64, 2)] * 5 + [(2, 5), (5, 2, 5), (5, 2, 5), (5, 2, 5), (5, 2, 3)]),
]


@pytest.mark.slow
@pytest.mark.parametrize("optimizer", ["greedy", "dp"])
@pytest.mark.parametrize("which", ["all", "last-half", "one"])
@pytest.mark.parametrize(("name", "equation", "shapes"), TREES, ids=[t[0] for t in TREES])
def test_the_exact_search_equals_brute_force_on_trees_of_ten(name, equation, shapes, which,
                                                             optimizer):
    plan = plan_contraction(parse_equation(equation, shapes), optimizer)
    grad = {"all": range(10), "last-half": range(5, 10), "one": [7]}[which]
    grad = list(grad)
    replays = every_keep(plan, grad, F64)
    least = brute_force(plan, grad, F64, None, replays)
    reverse = build_strategy("reverse", plan, grad, itemsize=F64).memory.peak_bytes
    for budget in (None, least[1], (least[1] + reverse) // 2, reverse - 1, least[1] - 1):
        choice = choose_keep(plan, grad, F64, budget, search="exact")
        assert choice.complete
        assert rank_of(choice, budget) == brute_force(plan, grad, F64, budget, replays), budget


def test_the_floor_bounds_every_larger_keep_set():
    plan = tn18("dp")
    grad = frozenset(range(18))
    template = checkpoint_module.KeepSchedules(plan, grad)
    candidates = checkpoint_candidates(plan, grad)
    import random

    generator = random.Random(7)
    for _ in range(60):
        depth = generator.randint(0, len(candidates))
        decided = candidates[:depth]
        keep = frozenset(k for k in decided if generator.random() < 0.5)
        larger = keep | {k for k in candidates[depth:] if generator.random() < 0.5}
        assert template.floor(keep, decided, 4) <= evaluate_keep(plan, grad, larger, 4)[0]


@pytest.mark.parametrize("search", ["greedy", "largest-first"])
@pytest.mark.parametrize("optimizer", ["dp", "greedy"])
def test_the_heuristics_never_exceed_a_budget_they_claim_to_meet(search, optimizer):
    plan = tn18(optimizer)
    for grad in (range(18), range(9, 18)):
        reverse = build_strategy("reverse", plan, list(grad), itemsize=4).memory.peak_bytes
        floor = floor_bytes(plan, grad, 4)
        for budget in (None, reverse, (reverse + floor) // 2, floor, reverse * 9 // 10):
            result = checkpoint(plan, grad, itemsize=4, budget_bytes=budget, search=search)
            section = result.details["checkpoint"]
            assert section["search"] == search
            if budget is None:
                assert section["fits_budget"] is None
                assert result.memory.peak_bytes <= reverse
                continue
            assert section["fits_budget"] == (result.memory.peak_bytes <= budget)
            if budget >= reverse:
                assert section["fits_budget"] and section["recompute_flops"] == 0


def matrix_chain(operands: int, size: int = 3) -> Plan:
    labels = [chr(0x100 + k) for k in range(operands + 1)]
    equation = ",".join(labels[k] + labels[k + 1] for k in range(operands)) + "->" + (
        labels[0] + labels[operands])
    return plan_contraction(parse_equation(equation, [(size, size)] * operands), "greedy")


@pytest.mark.parametrize(
    ("candidates", "method"),
    [(EXACT_LIMIT, "exact"), (EXACT_LIMIT + 1, "greedy"), (GREEDY_LIMIT, "greedy"),
     (GREEDY_LIMIT + 1, "largest-first")],
)
def test_the_search_is_exact_greedy_or_largest_first_by_size(candidates, method):
    plan = matrix_chain(candidates + 2)  # a chain of n matrices: n - 2 intermediates
    grad = range(candidates + 2)
    assert len(checkpoint_candidates(plan, grad)) == candidates
    result = checkpoint(plan, grad, budget_bytes=10**6)
    assert result.details["checkpoint"]["search"] == method
    assert result.details["checkpoint"]["candidates"] == candidates


def test_a_network_of_500_operands_takes_the_heuristic():
    # A chain of 500 matrices: 498 candidates, far above the greedy search's limit.
    plan = matrix_chain(500, size=4)
    grad = range(500)
    reverse = build_strategy("reverse", plan, list(grad), itemsize=4).memory.peak_bytes
    result = checkpoint(plan, grad, itemsize=4, budget_bytes=reverse * 3 // 4)
    section = result.details["checkpoint"]
    assert section["search"] == "largest-first"
    assert section["evaluated"] <= 2 * math.ceil(math.log2(section["candidates"])) + 3
    assert section["fits_budget"] is (result.memory.peak_bytes <= reverse * 3 // 4)
    assert any("largest-first heuristic" in w for w in result.warnings)


def test_an_exact_search_out_of_replays_says_so(monkeypatch):
    # A 7-operand network whose least peak needs more than 3 replays to prove (tn18's
    # is proven at once since the lowering's lookahead leaves it no layout copies).
    case = by_name("oe13:chd,bde,agbc,hiad,hgc,hgi,hiad")
    plan = plan_contraction(parse_equation(case.equation, case.shapes), "dp")
    full = choose_keep(plan, range(7), 4, None)
    assert full.method == "exact" and full.complete is (full.evaluated <= 400)
    cut = choose_keep(plan, range(7), 4, None, exact_evaluations=3)
    assert cut.method == "exact" and not cut.complete
    assert cut.peak_bytes >= full.peak_bytes
    monkeypatch.setattr(checkpoint_module, "EXACT_EVALUATIONS", 3)
    result = checkpoint(plan, range(7), itemsize=4)
    assert result.details["checkpoint"]["complete"] is False
    assert result.memory.peak_bytes == cut.peak_bytes
    assert ("checkpoint: the exact search stopped after 3 replays; the intermediates kept "
            "are the best found, not proven the best") in result.warnings


# --- options ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"budget_bytes": 0}, "positive size"),
        ({"budget_bytes": -5}, "positive size"),
        ({"budget_bytes": True}, "positive size"),
        ({"budget_bytes": "lots"}, "not a byte size"),
        ({"budget_bytes": float("inf")}, "finite"),
        ({"keep": [0]}, r"0 is not an intermediate \(operands are 0 to 3, the output is 6\); "
                        r"the intermediates are 4 to 5"),
        ({"keep": [6]}, "6 is not an intermediate"),
        ({"keep": "45"}, "must be a list"),
        ({"keep": ["x4"]}, "'x4' is not an intermediate id"),
        ({"search": "fast"}, "search must be one of auto, exact, greedy, largest-first"),
        ({"memory": 1}, "strategy 'checkpoint' has no option 'memory'; its options: "
                        "budget_bytes, keep, search"),
    ],
)
def test_bad_options_are_one_line_errors(options, match):
    with pytest.raises(PlanningError, match=match):
        checkpoint(chain4(), range(4), **options)


def test_a_budget_may_be_a_size_text():
    a = checkpoint(chain4(), range(4), budget_bytes="1KiB")
    b = checkpoint(chain4(), range(4), budget_bytes=1024)
    assert a.details == b.details
    assert a.details["checkpoint"]["budget_bytes"] == 1024


# --- the report ------------------------------------------------------------------------------


def test_the_json_entry_has_the_checkpoint_section_and_validates():
    report = analyze(*CHAIN4, dtype="float64", strategies=["reverse", "checkpoint"],
                     strategy_options={"checkpoint": {"keep": [5]}})
    data = json.loads(json.dumps(report.to_dict()))
    validate_report(data)
    reverse, entry = data["strategies"]
    assert "checkpoint" not in reverse
    assert entry["name"] == "checkpoint"
    assert entry["checkpoint"] == {
        "search": "given", "complete": True, "budget_bytes": None, "fits_budget": None,
        "recompute_flops": 48, "candidates": 2, "evaluated": 1,
        "kept": [{"id": 5, "term": "ad", "bytes": 80}],
        "recomputed": [{"id": 4, "term": "ca", "bytes": 64, "times": 1, "flops": 48}],
    }
    assert entry["backward_flops"] == reverse["backward_flops"] + 48


def test_the_choice_is_the_replay_build_strategy_reports():
    for optimizer in ("dp", "greedy"):
        plan = tn18(optimizer)
        for budget in (None, 400_000, 700_000):
            result = checkpoint(plan, range(18), itemsize=4, budget_bytes=budget)
            choice = choose_keep(plan, range(18), 4, budget)
            assert result.memory.peak_bytes == choice.peak_bytes
            kept = frozenset(item["id"] for item in result.details["checkpoint"]["kept"])
            assert kept == choice.keep


def test_tn18_b512_at_the_midpoint_budget():
    # The budget B = F + (P - F) / 2, with P the modelled torch-autograd peak.
    case = by_name("tn18-b512")
    figures = {}
    for optimizer in ("auto", "dp"):
        report = analyze(case.equation, case.shapes, optimize=optimizer,
                         strategies=["reverse", "torch-autograd"])
        reverse, autograd = report.strategies
        floor = floor_bytes(report.plan, range(18), 4)
        budget = floor + (autograd.memory.peak_bytes - floor) // 2
        (result,) = analyze(case.equation, case.shapes, optimize=optimizer,
                            strategies=["checkpoint"],
                            strategy_options={"checkpoint": {"budget_bytes": budget}}).strategies
        section = result.details["checkpoint"]
        figures[optimizer] = (floor, autograd.memory.peak_bytes, reverse.memory.peak_bytes,
                              budget, result.memory.peak_bytes, section["recompute_flops"])
        assert section["search"] == "exact" and section["complete"]
        assert result.memory.peak_bytes <= reverse.memory.peak_bytes
    # P is torch.einsum's own peak (13.26 MB): torch plans its own path, whatever
    # --optimize says, so P and B are the same for both paths.
    # auto (greedy here): the forward pass alone peaks at 13.15 MB (a 1.3e6-element
    # intermediate), so no keep-set reaches the budget; the least peak is 13.22 MB.
    assert figures["auto"] == (106976, 13260280, 13255184, 6683628, 13224176, 151256)
    # dp: reverse (1.00 MB) already fits under B (6.68 MB): nothing is recomputed.
    assert figures["dp"] == (106976, 13260280, 1004432, 6683628, 1004432, 0)
    # Under a tighter budget on dp, checkpoint trades FLOPs for memory: 27% under reverse
    # (1.00 MB -> 731 KB) for 1.1e6 recompute FLOPs (backward +37%).
    (tight,) = analyze(case.equation, case.shapes, optimize="dp", strategies=["checkpoint"],
                       strategy_options={"checkpoint": {"budget_bytes": 545464}}).strategies
    assert (tight.memory.peak_bytes,
            tight.details["checkpoint"]["recompute_flops"]) == (731376, 1117592)


# --- execution -------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["torch", "numpy"])
@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_checkpoint_runs_on_the_cpu_with_both_backends(backend, dtype):
    report = analyze(*CHAIN4, dtype=dtype, strategies=["reverse", "checkpoint"],
                     strategy_options={"checkpoint": {"keep": []}})
    assert report.strategies[1].details["checkpoint"]["recompute_flops"] == 176
    ran = execute(report, devices=["cpu"], backend=backend, repeats=1, warmup=0)
    runs = {run.strategy: run for run in ran.runs if not run.is_baseline}
    for run in runs.values():
        assert run.skipped is None
        assert run.max_grad_error is not None and run.max_grad_error < 1e-12
    if backend == "torch":  # numpy's in-call temporaries are its own
        assert runs["checkpoint"].peak_bytes_measured == runs["checkpoint"].peak_bytes_predicted


def test_the_docstring_examples_run():
    import doctest

    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for module in (checkpoint_module, checkpoint_schedule_module):
        for test in finder.find(module, module.__name__):
            runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.attempted >= 4 and result.failed == 0
