"""Backward strategies: FLOPs, retained bytes and memory replay, by hand and on tn18-b512.

Hand figures use float64 (8 bytes) and the opt_einsum FLOP convention: the joint index
space of a step, times (inputs - 1) + 1 when the step sums an index.
"""

from __future__ import annotations

import doctest
import inspect
import math
import re
import string
from pathlib import Path

import pytest
import torch
from corpus import CASES, by_name
from hypothesis import given
from hypothesis import strategies as st
from strategies import einsum_problems

import einsum_analyze.strategies.gradient_plans as gradient_plans_module
import einsum_analyze.strategies.reverse as reverse_module
from einsum_analyze import (
    Plan,
    PlanningError,
    analyze,
    parse_equation,
    plan_contraction,
    simulate_memory,
)
from einsum_analyze.backends.torch_backend import run_schedule
from einsum_analyze.model.memory import Event, forward_schedule, input_elements
from einsum_analyze.model.planning import OPTIMIZERS
from einsum_analyze.strategies import (
    STRATEGIES,
    StrategySpec,
    build_strategy,
    default_strategy_names,
    get_strategy,
    plan_gradients,
    register_strategy,
    strategy_names,
    unregister_strategy,
)
from einsum_analyze.torch_model.forward import torch_autograd_schedule

F64 = 8

# ab,bc,cd->ad with the path ((0, 1), (0, 1)): inputs 6 + 12 + 20 = 38 elements.
#   step 0: ab,bc -> ac (8 elements), joint abc = 24, summed: 48 FLOPs
#   step 1: ac,cd -> ad (10 elements), joint acd = 40, summed: 80 FLOPs
CHAIN = ("ab,bc,cd->ad", [(2, 3), (3, 4), (4, 5)])
CHAIN_PATH = ((0, 1), (0, 1))


def chain_plan() -> Plan:
    return Plan.from_path(parse_equation(*CHAIN), CHAIN_PATH)


def build(name, plan, grad, itemsize=F64, optimize="auto"):
    gradients = plan_gradients(plan.equation, grad, optimize) if name == "independent" else None
    return build_strategy(name, plan, grad, itemsize=itemsize, gradients=gradients)


def backward_events(result):
    return [e for e in result.events if e.phase == "backward"]


def kept_after_forward(result) -> set[str]:
    """Intermediates the forward pass of a schedule leaves alive (the output aside)."""
    allocated = [e.tensor for e in result.events if e.phase == "forward" and e.kind == "alloc"]
    freed = {e.tensor for e in result.events if e.phase == "forward" and e.kind == "free"}
    return set(allocated[:-1]) - freed


# --- the 3-matrix chain, by hand ------------------------------------------------------------


def test_chain_forward_flops():
    plan = chain_plan()
    assert [s.flops for s in plan.steps] == [48, 80]
    for name in STRATEGIES:
        assert build(name, plan, [0, 1, 2]).forward_flops == 128


def test_chain_reverse_by_hand():
    result = build("reverse", chain_plan(), [0, 1, 2])
    # Step 1 gives d(ac) = ad,cd->ac and d(cd) = ad,ac->cd: 80 FLOPs each (joint acd).
    # Step 0 gives d(ab) = ac,bc->ab and d(bc) = ac,ab->bc: 48 FLOPs each (joint abc).
    assert result.backward_flops == 80 + 80 + 48 + 48
    assert dict(result.operand_flops) == {0: 48, 1: 48, 2: 80}
    assert result.shared_flops == 80  # the gradient of the intermediate ac
    # ac feeds step 1 whose other input cd needs a gradient: it is kept (8 elements).
    assert result.memory.retained_bytes == 8 * F64
    assert kept_after_forward(result) == {"x3"}
    # Replay in elements: inputs 38; +8 (ac) +10 (ad) = 56 at the end of forward; the
    # caller's upstream gradient (the seed) +10 = 66; d(ac) +8 = 74; d(cd) +20 = 94;
    # freeing the seed releases nothing (the caller holds it); freeing ac -8 = 86;
    # d(ab) +6, d(bc) +12 = 104 (the peak); final, once the caller lets go of the
    # upstream gradient = inputs 38 + output 10 + gradients 38.
    mem = result.memory
    assert mem.input_bytes == 38 * F64
    assert mem.forward_peak_bytes == 56 * F64
    assert mem.peak_bytes == 104 * F64
    assert mem.final_bytes == 86 * F64
    assert result.backward_flops / result.forward_flops == 2.0


def test_chain_independent_by_hand():
    result = build("independent", chain_plan(), [0, 1, 2])
    # Each core is a 3-operand einsum (ad with two of the matrices) planned on its own:
    # one 80-FLOP step (joint with a, d and c) and one 48-FLOP step (joint with b), each.
    assert dict(result.operand_flops) == {0: 128, 1: 128, 2: 128}
    assert result.backward_flops == 384
    assert result.shared_flops == 0
    assert result.memory.retained_bytes == 0
    assert kept_after_forward(result) == set()
    # inference forward frees ac: 48 after forward; G +10 = 58; the largest core makes an
    # 8-element intermediate then the 20-element gradient: 58 + 12 + 6 (earlier
    # gradients) + 8 + 20 = 104.
    assert result.memory.peak_bytes == 104 * F64


@pytest.mark.parametrize(
    ("grad", "backward", "operand_flops", "retained_elements"),
    [
        # d(cd) needs only ac, kept from forward; nothing flows to step 0.
        ([2], 80, {2: 80}, 8),
        # d(ab) needs d(ac) (80, shared) then ac,bc->ab (48). Step 1's other input cd is
        # an operand, and ac itself is not needed since cd needs no gradient.
        ([0], 128, {0: 48}, 0),
        ([], 0, {}, 0),
    ],
)
def test_chain_reverse_partial_grad(grad, backward, operand_flops, retained_elements):
    result = build("reverse", chain_plan(), grad)
    assert result.backward_flops == backward
    assert dict(result.operand_flops) == operand_flops
    assert result.memory.retained_bytes == retained_elements * F64


# --- ijj,k->ik, by hand ---------------------------------------------------------------------

DIAG = ("ijj,k->ik", [(2, 3, 3), (4,)])  # i=2, j=3, k=4; inputs 18 + 4 = 22 elements


def test_diag_private_reverse_by_hand():
    plan = plan_contraction(parse_equation(*DIAG))
    assert plan.flops == 2 * 3 * 4 * 2  # joint ijk, j summed
    result = build("reverse", plan, [0, 1])
    # d(ijj): core ik,k->i (joint ik = 8, k summed: 16), broadcast over j, embedded.
    # d(k): core ik,ijj->k (joint ijk = 24, summed: 48).
    assert dict(result.operand_flops) == {0: 16, 1: 48}
    assert result.backward_flops == 64
    assert result.memory.retained_bytes == 0  # one step: only operands are read back
    # Elements: inputs 22; output 8 (+2 workspace: the j-sum of ijj) -> high 32;
    # seed +8 = 38; d(k) +4 = 42 (44 with its 2-element workspace); core i +2 = 44;
    # d(ijj) +18 = 62 (the peak).
    mem = result.memory
    assert mem.forward_peak_bytes == 32 * F64
    assert mem.peak_bytes == 62 * F64
    assert mem.final_bytes == (22 + 8 + 22) * F64
    kinds = [(e.op, e.equation) for e in backward_events(result) if e.kind == "alloc"]
    assert ("unreduce", "i->ijj") in kinds


def test_diag_private_independent_matches_reverse_flops():
    plan = plan_contraction(parse_equation(*DIAG))
    result = build("independent", plan, [0, 1])
    assert dict(result.operand_flops) == {0: 16, 1: 48}
    assert result.memory.retained_bytes == 0


def test_diag_private_torch_autograd_keeps_the_reduced_copy():
    plan = plan_contraction(parse_equation(*DIAG))
    result = build("torch-autograd", plan, [0, 1])
    # torch.einsum sums j out of ijj first (2 elements) and keeps that copy for k's
    # gradient; both gradients of i,k->ik cost 16 (joint ik, summed).
    assert result.memory.retained_bytes == 2 * F64
    assert result.backward_flops == 32


# --- operands that need no gradient cost nothing ------------------------------------------


@pytest.mark.parametrize("name", STRATEGIES)
@pytest.mark.parametrize("case_name", ["chain-3", "diag-then-outer", "tn18-b512", "readme"])
def test_no_gradient_costs_nothing(name, case_name):
    case = by_name(case_name)
    plan = plan_contraction(parse_equation(case.equation, case.shapes))
    result = build(name, plan, [])
    assert result.backward_flops == 0
    assert result.memory.retained_bytes == 0
    assert dict(result.operand_flops) == {}
    assert backward_events(result) == []
    assert result.memory.peak_bytes == result.memory.forward_peak_bytes


@pytest.mark.parametrize("name", STRATEGIES)
def test_matmul_gradient_of_one_operand_retains_nothing(name):
    # ab,bc->ac, grad=[0]: d(ab) = ac,bc->ab needs operand 1, an input: nothing new kept.
    plan = plan_contraction(parse_equation("ab,bc->ac", [(2, 3), (3, 4)]))
    result = build(name, plan, [0])
    assert result.memory.retained_bytes == 0
    assert result.backward_flops == 2 * 3 * 4 * 2
    assert dict(result.operand_flops) == {0: 48}
    targets = {e.tensor for e in backward_events(result) if e.kind == "alloc"}
    assert "d1" not in targets and "d0" in targets


# --- tn18-b512 ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tn18():
    case = by_name("tn18-b512")
    eq = parse_equation(case.equation, case.shapes)
    return eq, {opt: plan_contraction(eq, opt) for opt in ("greedy", "dp")}


def expected_retained(plan: Plan, grad) -> set[str]:
    """The rule: a step input is retained exactly when another input of the step needs a
    gradient (intermediates only: operands are the caller's)."""
    num_ops = plan.equation.num_operands
    needs = {k: k in set(grad) for k in range(num_ops)}
    for step in plan.steps:
        needs[step.output] = any(needs[i] for i in step.inputs)
    return {
        f"x{i}"
        for step in plan.steps
        for i in step.inputs
        if i >= num_ops and any(needs[j] for j in step.inputs if j != i)
    }


@pytest.mark.parametrize("optimizer", ["greedy", "dp"])
@pytest.mark.parametrize(
    "grad",
    [range(18), range(9, 18), range(9), [0], [17], [9, 13], []],
    ids=["all", "params", "data", "first", "last", "two", "none"],
)
def test_reverse_retention_rule_on_tn18(tn18, optimizer, grad):
    _, plans = tn18
    plan = plans[optimizer]
    result = build("reverse", plan, list(grad))
    kept = kept_after_forward(result)
    assert kept == expected_retained(plan, grad)
    sizes = {f"x{s.output}": s.output_elements for s in plan.steps}
    assert result.memory.retained_bytes == sum(sizes[name] for name in kept) * F64


def test_tn18_greedy_all_operands_retains_every_intermediate(tn18):
    _, plans = tn18
    plan = plans["greedy"]
    result = build("reverse", plan, list(range(18)))
    intermediates = sum(step.output_elements for step in plan.steps[:-1])
    assert result.memory.retained_bytes == intermediates * F64
    assert result.memory.retained_bytes == 20_951_616  # docs/method.md section 8: 21.0 MB


def test_tn18_dp_parameters_only_retains_688576_bytes(tn18):
    _, plans = tn18
    result = build("reverse", plans["dp"], list(range(9, 18)))
    assert result.memory.retained_bytes == 688_576  # docs/method.md section 8: 689 KB


def test_tn18_other_figures_of_method_section_8(tn18):
    _, plans = tn18
    # Greedy with only the 9 parameters differentiated keeps 21 KB.
    assert build("reverse", plans["greedy"], list(range(9, 18))).memory.retained_bytes == 21_056
    # dp with every operand differentiated keeps the sum of its intermediates but the
    # output: 1,230,144 B (1.23 MB; torch's saved tensors on this
    # path measure 1,230,144 B as well).
    dp = plans["dp"]
    assert dp.flops == 1_599_792 and dp.largest_intermediate_elements == 71_680
    intermediates = sum(step.output_elements for step in dp.steps[:-1]) * F64
    assert build("reverse", dp, list(range(18))).memory.retained_bytes == intermediates
    assert intermediates == 1_230_144


def test_tn18_path_choice_flips_with_the_grad_set(tn18):
    # docs/method.md section 8: with the 9 parameters differentiated, greedy keeps far less than
    # dp; with every operand differentiated, dp keeps far less than greedy.
    _, plans = tn18
    params = list(range(9, 18))
    every = list(range(18))
    greedy_params = build("reverse", plans["greedy"], params).memory.retained_bytes
    dp_params = build("reverse", plans["dp"], params).memory.retained_bytes
    greedy_all = build("reverse", plans["greedy"], every).memory.retained_bytes
    dp_all = build("reverse", plans["dp"], every).memory.retained_bytes
    assert greedy_params < dp_params
    assert dp_all < greedy_all


@pytest.mark.parametrize("optimizer", ["greedy", "dp"])
def test_tn18_reverse_backward_forward_ratio(tn18, optimizer):
    _, plans = tn18
    result = build("reverse", plans[optimizer], list(range(18)))
    ratio = result.backward_flops / result.forward_flops
    assert 1.75 <= ratio <= 2.07  # docs/method.md section 8
    if optimizer == "greedy":
        assert ratio == pytest.approx(1.753, abs=1e-3)


def test_tn18_independent_costs_5_to_8_times_reverse(tn18):
    eq, plans = tn18
    plan = plans["greedy"]
    every = list(range(18))
    reverse = build("reverse", plan, every)
    gradients = plan_gradients(eq, every, "greedy", forward=plan)
    independent = build_strategy("independent", plan, every, itemsize=F64, gradients=gradients)
    ratio = independent.backward_flops / reverse.backward_flops
    assert 5 <= ratio <= 8
    # docs/method.md section 8: independent gradients cost 13x the forward FLOPs.
    assert independent.backward_flops / plan.flops == pytest.approx(13, rel=0.05)


# --- plan_gradients: which optimizer plans the cores -----------------------------------------


def test_plan_gradients_plans_every_core_with_the_optimizer():
    eq = parse_equation(*CHAIN)
    gradients = plan_gradients(eq, [2, 0], "optimal")
    assert gradients.optimizer == "optimal"
    assert gradients.operands == (2, 0)
    for spec, plan in zip(gradients.specs, gradients.plans, strict=True):
        assert plan.equation.explicit == spec.core(eq).explicit
        assert plan.flops == plan_contraction(spec.core(eq), "optimal").flops
    rows = gradients.to_dicts(F64)
    assert [row["operand"] for row in rows] == [2, 0]
    assert rows[0]["equation"] == "ad,ab,bc->cd"
    assert rows[0]["flops"] == 128
    assert rows[0]["gradient_bytes"] == 20 * F64


def test_plan_gradients_above_large_network_follows_the_forward_tree(monkeypatch):
    case = by_name("chain-4")
    eq = parse_equation(case.equation, case.shapes)
    plan = plan_contraction(eq, "optimal")
    monkeypatch.setattr(gradient_plans_module, "LARGE_NETWORK", 0)
    grad = list(range(eq.num_operands))
    gradients = plan_gradients(eq, grad, "optimal", forward=plan)
    assert gradients.optimizer == "forward-tree"
    for spec, core in zip(gradients.specs, gradients.plans, strict=True):
        assert core.equation.explicit == spec.core(eq).explicit
        assert core.optimizer == "forward-tree"
    # Without the forward plan there is no tree to follow: the cores are searched.
    assert plan_gradients(eq, grad, "optimal").optimizer == "optimal"

    # The re-rooted cores still give the right gradients through the executor.
    result = build_strategy("independent", plan, grad, itemsize=F64, gradients=gradients)
    generator = torch.Generator().manual_seed(3)
    operands = [torch.randn(s, generator=generator, dtype=torch.float64) for s in eq.shapes]
    upstream = torch.randn([eq.size_dict[c] for c in eq.output], generator=generator,
                           dtype=torch.float64)
    run = run_schedule(result.events, operands, upstream.clone(), eq.size_dict)
    leaves = [t.clone().requires_grad_(True) for t in operands]
    expected = torch.autograd.grad(torch.einsum(case.equation, *leaves), leaves, upstream)
    for k, want in enumerate(expected):
        torch.testing.assert_close(run.gradients[k], want, rtol=1e-12, atol=1e-12)


def test_plan_gradients_does_not_search_once_per_operand_on_18_operands(tn18):
    # dp on each of tn18's 18 cores would take about a minute (gradient_plans.SEARCH_LIMIT).
    eq, plans = tn18
    grad = list(range(18))
    assert plan_gradients(eq, grad, "dp", forward=plans["dp"]).optimizer == "forward-tree"
    assert plan_gradients(eq, grad, "dp").optimizer == "greedy"


# --- memory replay invariants ----------------------------------------------------------------

ANALYSABLE = [case for case in CASES if case.category != "bench" or case.input_elements < 10**6]


@pytest.mark.parametrize("case", ANALYSABLE, ids=str)
def test_replay_invariants_on_the_corpus(case):
    report = analyze(case.equation, case.shapes, dtype="float64")
    eq, plan = report.equation, report.plan
    inputs = input_elements(plan) * F64
    output = plan.steps[-1].output_elements * F64
    gradient_bytes = sum(math.prod(shape) for shape in eq.shapes) * F64
    # Peak with every intermediate retained is at least the peak without.
    everything = [s.output for s in plan.steps[:-1]]
    kept = simulate_memory(forward_schedule(plan, everything), input_elements=input_elements(plan),
                           output_elements=plan.steps[-1].output_elements, itemsize=F64)
    assert kept.peak_bytes >= report.forward_memory.peak_bytes
    assert kept.retained_bytes == sum(s.output_elements for s in plan.steps[:-1]) * F64
    assert report.inference_memory is not None
    for result in report.strategies:
        mem = result.memory
        # torch.einsum returns a view of the operand where the equation only permutes or
        # takes a diagonal (``ii->i``, ``...->...``): its output owns no storage.
        output = plan.steps[-1].output_elements * F64
        if result.name == "torch-autograd":
            output = torch_autograd_schedule(eq, range(eq.num_operands)).output_elements * F64
        assert mem.input_bytes == inputs
        assert mem.peak_bytes >= mem.forward_peak_bytes >= inputs + output
        assert mem.retained_bytes >= 0
        # Everything but the output and the gradients is freed by the end. A gradient
        # that is a broadcast view holds only its source's storage.
        held = {e.tensor: e.elements for e in result.events
                if e.kind == "alloc" and e.tensor.startswith("d")}
        assert sorted(int(name[1:]) for name in held) == list(range(eq.num_operands))
        assert mem.final_bytes == inputs + output + sum(held.values()) * F64
        assert mem.final_bytes <= inputs + output + gradient_bytes
        assert sum(result.operand_flops.values()) + result.shared_flops == result.backward_flops
        assert set(result.operand_flops) == set(range(eq.num_operands))
        if result.name != "torch-autograd":
            assert result.forward_flops == plan.flops
            # Retaining for backward never lowers the forward peak (same lowering).
            assert mem.forward_peak_bytes >= report.inference_memory.peak_bytes
        if result.name == "independent":
            assert mem.retained_bytes == 0


@pytest.mark.parametrize("name", STRATEGIES)
@pytest.mark.parametrize("case_name", ["chain-4", "diag-both", "ellipsis-batched-gemm",
                                       "tn18-b512", "oe32:fdf,cdd,ccd,afe->ae"])
def test_bytes_scale_with_itemsize(name, case_name):
    case = by_name(case_name)
    plan = plan_contraction(parse_equation(case.equation, case.shapes))
    grad = list(range(plan.equation.num_operands))
    small, large = build(name, plan, grad, itemsize=2), build(name, plan, grad, itemsize=16)
    a, b = small.memory, large.memory
    assert b.input_bytes == 8 * a.input_bytes
    assert b.peak_bytes == 8 * a.peak_bytes
    assert b.retained_bytes == 8 * a.retained_bytes
    assert b.forward_peak_bytes == 8 * a.forward_peak_bytes
    assert b.live_bytes == tuple(8 * x for x in a.live_bytes)
    assert b.high_bytes == tuple(8 * x for x in a.high_bytes)
    assert b.peak_event == a.peak_event
    assert small.backward_flops == large.backward_flops


def test_simulate_memory_granularity_rounds_every_allocation():
    events = [
        Event(kind="alloc", tensor="x2", elements=3, phase="forward", workspace=(5,)),
        Event(kind="alloc", tensor="x3", elements=200, phase="forward"),
        Event(kind="free", tensor="x2", elements=3, phase="forward"),
    ]
    exact = simulate_memory(events, input_elements=10, output_elements=200, itemsize=4)
    rounded = simulate_memory(events, input_elements=10, output_elements=200, itemsize=4,
                              granularity=512)
    # Exact: 40 B inputs; x2 12 B (+20 B workspace); x3 800 B.
    assert exact.high_bytes == (40 + 12 + 20, 40 + 12 + 800, 40 + 800)
    assert exact.peak_bytes == 852
    # Rounded to 512: x2 512 (+512 workspace); x3 800 -> 1024; the inputs are not rounded.
    assert rounded.input_bytes == 40
    assert rounded.high_bytes == (40 + 512 + 512, 40 + 512 + 1024, 40 + 1024)
    assert rounded.live_bytes == (40 + 512, 40 + 512 + 1024, 40 + 1024)
    assert rounded.peak_bytes == 40 + 1536
    assert rounded.retained_bytes == 0  # the output is rounded the same way
    # Rounding never lowers a figure; granularity 1 is exact.
    assert all(r >= e for r, e in zip(rounded.high_bytes, exact.high_bytes, strict=True))
    one = simulate_memory(events, input_elements=10, output_elements=200, itemsize=4,
                          granularity=1)
    assert one == exact


def test_simulate_memory_view_consumes_its_input():
    events = [
        Event(kind="alloc", tensor="c", elements=6, phase="backward"),
        Event(kind="alloc", tensor="d0", elements=6, phase="backward", op="view",
              consumes=(("c", 6),)),
    ]
    mem = simulate_memory(events, input_elements=0, output_elements=0, itemsize=4)
    assert mem.live_bytes == (24, 24)
    assert mem.high_bytes == (24, 24)  # the view takes over the storage: never two


def test_simulate_memory_rejects_a_double_free():
    events = [Event(kind="free", tensor="x2", elements=1, phase="forward")]
    with pytest.raises(ValueError, match="x2"):
        simulate_memory(events, input_elements=0, output_elements=0, itemsize=4)


# --- the registry ----------------------------------------------------------------------------

ROOT = Path(__file__).parents[3]


@pytest.fixture
def restore_registry():
    """Registers nothing; puts the registry back as it was after the test."""
    before = {name: get_strategy(name) for name in strategy_names()}
    yield
    for name in strategy_names():
        unregister_strategy(name)
    for spec in before.values():
        register_strategy(spec)
    assert strategy_names() == tuple(before)


def test_registry_lists_the_builtin_strategies_in_order():
    assert strategy_names() == ("reverse", "independent", "torch-autograd", "checkpoint",
                                "recompute", "sliced")
    # checkpoint and sliced are modelled when asked for (they search): not by default.
    assert STRATEGIES == default_strategy_names() == strategy_names()[:3]
    assert get_strategy("independent").needs_gradient_plans
    assert not get_strategy("reverse").needs_gradient_plans
    assert not get_strategy("torch-autograd").lowered
    assert get_strategy("reverse").lowered


def test_unknown_strategy_lists_the_valid_names():
    message = (r"unknown strategy 'tiled'; choose from: reverse, independent, torch-autograd, "
               r"checkpoint, recompute, sliced")
    with pytest.raises(PlanningError, match=message):
        get_strategy("tiled")
    with pytest.raises(PlanningError, match=message):
        analyze(*CHAIN, strategies=["reverse", "tiled"])
    with pytest.raises(PlanningError, match=message):
        build_strategy("tiled", chain_plan(), [0], itemsize=F64)


@pytest.mark.parametrize(
    ("name", "match"),
    [("reverse", "already registered"), ("none", "reserved"), ("all", "reserved"),
     ("a,b", "without commas"), ("Big", "lower case"), ("", "lower case")],
)
def test_register_refuses_taken_reserved_and_malformed_names(restore_registry, name, match):
    spec = StrategySpec(name=name, build=reverse_module.build_reverse, description="x")
    with pytest.raises(ValueError, match=match):
        register_strategy(spec)


def test_register_replace_keeps_the_place(restore_registry):
    spec = StrategySpec(name="independent", build=reverse_module.build_reverse,
                        description="reverse in disguise")
    register_strategy(spec, replace=True)
    assert strategy_names() == ("reverse", "independent", "torch-autograd", "checkpoint",
                                "recompute", "sliced")
    assert get_strategy("independent") is spec


def test_builders_return_their_warnings_analyze_only_collects_them(restore_registry):
    def build_warning(given):
        builder = reverse_module.build_reverse(given)
        builder.warnings.append("a figure to know about")
        return builder

    register_strategy(StrategySpec(name="warns", build=build_warning, description="toy"))
    register_strategy(StrategySpec(name="warns-too", build=build_warning, description="toy"))
    assert build("reverse", chain_plan(), [0, 1, 2]).warnings == ()
    assert build("torch-autograd", chain_plan(), [0, 1, 2]).warnings == ()
    assert build("warns", chain_plan(), [0, 1, 2]).warnings == ("a figure to know about",)
    report = analyze(*CHAIN, strategies=["warns", "torch-autograd", "warns-too"])
    assert report.warnings == ("a figure to know about",)  # each warning once
    assert [s.name for s in report.strategies] == ["warns", "torch-autograd", "warns-too"]
    assert report.gradients is None  # no chosen strategy needs the planned cores


def test_analyze_names_no_strategy():
    # analyze drives every strategy through the registry: no name is special to it.
    import einsum_analyze.analysis as analysis_module

    source = inspect.getsource(analysis_module.analyze) + inspect.getsource(
        analysis_module._check_strategies
    )
    for name in strategy_names():
        assert f'"{name}"' not in source and f"'{name}'" not in source


def test_strategy_options_are_checked():
    with pytest.raises(PlanningError, match=r"strategy 'reverse' has no option 'keep'; "
                                             r"its options: none"):
        build_strategy("reverse", chain_plan(), [0], itemsize=F64, options={"keep": 1})
    with pytest.raises(PlanningError, match=r"options given for strategy 'independent', "
                                             r"which is not among the chosen: reverse"):
        analyze(*CHAIN, strategies=["reverse"], strategy_options={"independent": {}})


# A toy strategy, registered as a new module would register one: reverse mode with an
# option, a warning of its own, and the planned gradient cores it asks for.
def build_toy(given):
    assert given.gradients is not None
    assert given.gradients.operands == tuple(sorted(given.grad))
    builder = reverse_module.reverse_events(given.plan, given.grad)
    builder.warnings.append(f"toy note: {given.options['note']}")
    return builder


TOY = StrategySpec(
    name="toy-reverse",
    build=build_toy,
    description="reverse mode, for the registry's tests",
    needs_gradient_plans=True,
    default=False,
    options={"note": "none given"},
)


def test_a_registered_toy_strategy_runs_through_analyze(restore_registry):
    register_strategy(TOY)
    assert strategy_names()[-1] == "toy-reverse"
    assert "toy-reverse" not in default_strategy_names()
    report = analyze(*CHAIN, dtype="float64", strategies=["reverse", "toy-reverse"],
                     strategy_options={"toy-reverse": {"note": "hello"}})
    reverse, toy = report.strategies
    assert toy.name == "toy-reverse"
    assert toy.events == reverse.events  # lowered like reverse: the same schedule
    assert toy.memory == reverse.memory
    assert (toy.backward_flops, toy.memory.peak_bytes) == (256, 104 * F64)
    assert "toy note: hello" in report.warnings
    assert report.gradients is not None  # planned because the toy asked for them
    assert report.to_dict()["strategies"][1]["name"] == "toy-reverse"
    default = analyze(*CHAIN, strategies=["toy-reverse"])
    assert "toy note: none given" in default.warnings
    # The registry is restored by the fixture: the next test sees the built-ins only.


def test_the_toy_strategy_is_gone_after_the_fixture():
    assert "toy-reverse" not in strategy_names()


def test_the_schema_enum_lists_the_registry():
    from einsum_analyze.report import load_schema

    name = load_schema()["$defs"]["strategy"]["properties"]["name"]
    assert name["enum"] == list(strategy_names())


def test_docs_list_the_registry_with_its_descriptions():
    text = (ROOT / "docs" / "strategies.md").read_text("utf-8")
    section = text.split("## Registered strategies", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^- `([^`]+)`: (.+)$", section, flags=re.MULTILINE)
    assert listed == [(name, get_strategy(name).description) for name in strategy_names()]


def test_cli_help_lists_the_registry():
    from click.testing import CliRunner

    from einsum_analyze.cli import cli

    result = CliRunner().invoke(cli, ["--help"], terminal_width=1000)
    help_text = " ".join(result.output.split())
    for name in strategy_names():
        assert f"{name}: {' '.join(get_strategy(name).description.split())}" in help_text


def test_the_docs_worked_example_runs(restore_registry):
    text = (ROOT / "docs" / "strategies.md").read_text("utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)
    assert blocks, "docs/strategies.md has no python example"
    namespace: dict[str, object] = {}
    for block in blocks:
        exec(compile(block, "docs/strategies.md", "exec"), namespace)  # noqa: S102
    assert "keep-all" in strategy_names()
    report = analyze(*CHAIN, dtype="float64", strategies=["reverse", "keep-all"])
    reverse, keep_all = report.strategies
    # Keeping every intermediate keeps ac (8 elements), as reverse does on this chain.
    assert keep_all.memory.retained_bytes == reverse.memory.retained_bytes == 8 * F64
    assert keep_all.backward_flops == reverse.backward_flops
    # With operand 0's gradient alone reverse keeps nothing; keep-all still keeps ac.
    report = analyze(*CHAIN, dtype="float64", grad=[0], strategies=["reverse", "keep-all"])
    reverse, keep_all = report.strategies
    assert (reverse.memory.retained_bytes, keep_all.memory.retained_bytes) == (0, 8 * F64)
    assert keep_all.memory.final_bytes == reverse.memory.final_bytes  # freed in backward


def test_registry_doctests():
    import einsum_analyze.strategies.registry as registry_module

    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner()
    for test in finder.find(registry_module, registry_module.__name__):
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.attempted > 0 and result.failed == 0


# --- plan_gradients: the SEARCH_LIMIT and LARGE_NETWORK boundaries -------------------------


def chain_of(n: int):
    """A matrix chain of ``n`` operands, sizes 2 and 3 alternating."""
    labels = string.ascii_lowercase[: n + 1]
    terms = [labels[k : k + 2] for k in range(n)]
    sizes = {c: 2 + k % 2 for k, c in enumerate(labels)}
    equation = ",".join(terms) + f"->{labels[0]}{labels[n]}"
    return parse_equation(equation, [tuple(sizes[c] for c in t) for t in terms])


def test_search_limit_is_8_operands():
    assert gradient_plans_module.SEARCH_LIMIT == 8


def test_plan_gradients_with_exactly_8_operands_searches_with_dp():
    eq = chain_of(8)
    forward = plan_contraction(eq, "dp")
    grad = list(range(8))
    gradients = plan_gradients(eq, grad, "dp", forward=forward)
    assert gradients.optimizer == "dp"
    assert gradients.warnings == ()
    for spec, core in zip(gradients.specs, gradients.plans, strict=True):
        assert core.optimizer == "dp"
        assert core.flops == plan_contraction(spec.core(eq), "dp").flops
    result = build_strategy("independent", forward, grad, itemsize=F64, gradients=gradients)
    assert result.optimizer == "dp" and result.warnings == ()


def test_plan_gradients_with_9_operands_follows_the_rerooted_tree_under_dp():
    eq = chain_of(9)
    forward = plan_contraction(eq, "dp")
    grad = list(range(9))
    gradients = plan_gradients(eq, grad, "dp", forward=forward)
    assert gradients.optimizer == "forward-tree"
    assert {core.optimizer for core in gradients.plans} == {"forward-tree"}
    (warning,) = gradients.warnings
    assert warning == (
        "the independent strategy follows the forward tree re-rooted at each operand for "
        "its 9 gradient contractions instead of planning each with 'dp': 'dp' searches too "
        "long to run once per operand above 8 operands"
    )
    result = build_strategy("independent", forward, grad, itemsize=F64, gradients=gradients)
    assert result.optimizer == "forward-tree"
    assert result.warnings == (warning,)
    # Without a forward tree, greedy plans the cores, and says so.
    alone = plan_gradients(eq, grad, "dp")
    assert alone.optimizer == "greedy"
    assert alone.warnings[0].startswith("the independent strategy plans with greedy for its 9")
    # A non-searching optimizer plans every core itself at 9 operands.
    assert plan_gradients(eq, grad, "greedy", forward=forward).optimizer == "greedy"


@pytest.mark.parametrize(("n", "expected"), [(64, "greedy"), (65, "forward-tree")])
def test_large_network_boundary(n, expected):
    assert gradient_plans_module.LARGE_NETWORK == 64
    eq = parse_equation(",".join(["a"] * n) + "->a", [(2,)] * n)
    forward = plan_contraction(eq, "greedy")
    gradients = plan_gradients(eq, [0, n - 1], "greedy", forward=forward)
    assert gradients.optimizer == expected
    assert bool(gradients.warnings) == (expected == "forward-tree")
    if gradients.warnings:
        assert gradients.warnings[0].endswith("the network has over 64 operands")


def test_plan_gradients_holds_every_core_to_the_memory_limit():
    # ea,ac,ce-> with 32x32 matrices: each core (upstream scalar and two matrices) builds
    # a 1,024-element matrix on the unlimited path; under 64 each runs in one step.
    eq = parse_equation("ea,ac,ce->", [(32, 32)] * 3)
    free = plan_gradients(eq, [0, 1, 2], "random-greedy")
    assert max(s.output_elements for core in free.plans for s in core.steps[:-1]) == 1024
    limited = plan_gradients(eq, [0, 1, 2], "random-greedy", memory_limit=64)
    for core in limited.plans:
        assert core.optimizer == "greedy"
        assert core.as_planned.path == ((0, 1, 2),)
        assert core.path == ((0, 1), (0, 1))  # what runs: pairwise, past the limit
    first, pairwise, rest, split = limited.warnings
    assert first.startswith("random-greedy's path for operand 0's gradient builds an "
                            "intermediate of 1,024 elements")
    assert pairwise.startswith("greedy's path for operand 0's gradient: its last step "
                               "contracts 3 tensors at once (98,304 FLOPs); run pairwise")
    assert pairwise.endswith("1,024 elements, over the memory limit of 64 elements")
    assert rest == ("the gradient contractions of operands 1, 2 also broke the memory limit "
                    "of 64 elements and were replanned under it")
    assert split == ("the gradient contractions of operands 1, 2 also contract three or more "
                     "tensors at once and run pairwise")
    # The re-rooted cores are checked too.
    forward = plan_contraction(eq, "greedy", memory_limit=64)
    rerooted = plan_gradients(eq, [0, 1, 2], "dp", forward=forward, memory_limit=64)
    for core in rerooted.plans:
        assert max((s.output_elements for s in core.as_planned.steps[:-1]), default=0) <= 64


@pytest.mark.parametrize("optimizer", OPTIMIZERS)
@given(problem=einsum_problems(min_operands=2), limit=st.integers(1, 64))
def test_gradient_contractions_never_exceed_the_limit(optimizer, problem, limit):
    eq = parse_equation(problem.equation, problem.shapes)
    grad = list(range(eq.num_operands))
    forward = plan_contraction(eq, optimizer, memory_limit=limit)
    for tree in (None, forward):
        gradients = plan_gradients(eq, grad, optimizer, forward=tree, memory_limit=limit)
        over = [spec.operand for spec, core in zip(gradients.specs, gradients.plans, strict=True)
                if max((s.output_elements for s in core.as_planned.steps[:-1]), default=0)
                > limit]
        if over:
            assert any("no path found" in w for w in gradients.warnings)
        # A core with a step of three or more tensors runs pairwise, and says so.
        if any(core.wide is not None for core in gradients.plans):
            assert any("pairwise" in w for w in gradients.warnings)
        assert all(len(step.inputs) <= 2 for core in gradients.plans for step in core.steps)
        # Every core replanned is said to be: the optimizer names agree with the warnings.
        replanned = [core for core in gradients.plans
                     if core.optimizer == "greedy" != gradients.optimizer]
        assert bool(replanned) <= bool(gradients.warnings)
