"""Forward planning: hand-computed FLOPs, step equations, paths, optimizers, memory limits."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import opt_einsum
import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import einsum_problems

from einsum_analyze import Plan, PlanningError, parse_equation, plan_contraction
from einsum_analyze.model.planning import OPTIMIZERS, count_flops, parse_memory_limit, size_of

CHAIN = ("ab,bc,cd->ad", [(2, 3), (3, 4), (4, 5)])


def chain():
    return parse_equation(*CHAIN)


# --- FLOPs by hand -----------------------------------------------------------------------


def test_gemm_flops():
    # joint space a*b*c = 24; two operands and a sum: factor 1 + 1
    plan = plan_contraction(parse_equation("ab,bc->ac", [(2, 3), (3, 4)]))
    assert plan.flops == 48
    assert plan.naive_flops == 48
    assert plan.path == ((0, 1),)
    (step,) = plan.steps
    assert step.equation == "bc,ab->ac"  # positions are popped right to left, as opt_einsum
    assert step.summed == "b"
    assert step.output_elements == 8
    assert plan.largest_intermediate_elements == 8


def test_chain_optimal_flops():
    # (ab,bc)->ac: 2*3*4*2 = 48, then (ac,cd)->ad: 2*4*5*2 = 80
    plan = plan_contraction(chain(), "optimal")
    assert plan.path == ((0, 1), (0, 1))
    assert [s.flops for s in plan.steps] == [48, 80]
    assert plan.flops == 128
    assert [s.equation for s in plan.steps] == ["bc,ab->ca", "ca,cd->ad"]
    assert [s.summed for s in plan.steps] == ["b", "c"]
    # naive: a*b*c*d = 120 times (3 - 1) + 1
    assert plan.naive_flops == 360
    assert plan.largest_intermediate_elements == 10  # the output ad


def test_chain_other_path_by_hand():
    plan = Plan.from_path(chain(), [(1, 2), (0, 1)])
    assert plan.optimizer == "explicit"
    assert [s.equation for s in plan.steps] == ["cd,bc->db", "db,ab->ad"]
    assert [s.flops for s in plan.steps] == [3 * 4 * 5 * 2, 2 * 3 * 5 * 2]
    assert plan.flops == 180
    assert [s.operands for s in plan.steps] == [(1, 2), (0, 1)]
    assert [s.inputs for s in plan.steps] == [(2, 1), (3, 0)]
    assert [s.output for s in plan.steps] == [3, 4]
    assert plan.ssa_path == ((2, 1), (3, 0))
    assert plan.output_id == 4
    assert [s.scaling for s in plan.steps] == [3, 3]
    assert [s.output_elements for s in plan.steps] == [15, 10]
    assert plan.largest_intermediate_elements == 15


def test_outer_product_has_no_sum():
    plan = plan_contraction(parse_equation("i,j->ij", [(3,), (4,)]))
    (step,) = plan.steps
    assert step.summed == ""
    assert step.flops == 12
    assert plan.naive_flops == 12


def test_diagonal_and_private_labels():
    eq = parse_equation("ii,i,j->j", [(3, 3), (3,), (4,)])
    plan = Plan.from_path(eq, [(0, 1), (0, 1)])
    assert [s.equation for s in plan.steps] == ["i,ii->", ",j->j"]
    assert [s.summed for s in plan.steps] == ["i", ""]
    assert [s.flops for s in plan.steps] == [3 * 2, 4]
    assert plan.naive_flops == 3 * 4 * 3


def test_single_operand():
    plan = plan_contraction(parse_equation("ii->i", [(3, 3)]))
    assert plan.path == ((0,),)
    (step,) = plan.steps
    assert step.equation == "ii->i"
    assert step.flops == 3
    assert step.inputs == (0,)
    assert step.output == 1


def test_scalar_equation():
    plan = plan_contraction(parse_equation(",,->", [(), (), ()]), "greedy")
    assert plan.largest_intermediate_elements == 1
    assert plan.steps[-1].output_term == ""


def test_removed_labels_in_first_seen_order():
    # The order of removed labels must not depend on set iteration (hash randomisation).
    eq = parse_equation("abcdfghij,bcdefghij->ae", [(2,) * 9, (2,) * 9])
    (step,) = Plan.from_path(eq, [(0, 1)]).steps
    assert step.summed == "bcdfghij"


def test_report_is_identical_across_hash_seeds():
    code = (
        "import json, einsum_analyze as ea;"
        "r = ea.analyze('abcdfghij,bcdefghij,ekl,lm->am', sizes=dict.fromkeys('abcdefghijklm', 2),"
        " optimize='greedy');"
        "d = r.to_dict(); d.pop('timing'); print(json.dumps(d['forward'], sort_keys=True))"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code], env={**os.environ, "PYTHONHASHSEED": str(seed)},
            capture_output=True, text=True, check=True,
        ).stdout
        for seed in (1, 2, 3)
    }
    assert len(outputs) == 1
    json.loads(outputs.pop())


def test_count_flops_and_size_of():
    sizes = {"a": 2, "b": 3, "c": 5}
    assert count_flops("abc", False, 1, sizes) == 30
    assert count_flops("abc", True, 2, sizes) == 60
    assert count_flops("abc", True, 4, sizes) == 30 * 4
    assert count_flops("", False, 1, sizes) == 1
    assert size_of("ab", sizes) == 6
    assert size_of("", sizes) == 1


def test_flops_are_exact_python_ints():
    eq = parse_equation("ab,bc,cd->ad", [(10**9,) * 2] * 3)
    plan = plan_contraction(eq, "greedy")
    assert isinstance(plan.flops, int)
    # each step spans three indices of 1e9 and sums one: 2e27 FLOPs, beyond float precision
    assert plan.flops == 2 * 2 * 10**27


# --- explicit paths ----------------------------------------------------------------------


def test_from_path_matches_plan_contraction():
    eq = chain()
    assert Plan.from_path(eq, [(0, 1), (0, 1)]).flops == plan_contraction(eq, "optimal").flops
    assert plan_contraction(eq, [[1, 2], [0, 1]]).flops == 180
    assert plan_contraction(eq, [[1, 2], [0, 1]]).optimizer == "explicit"


def test_from_path_accepts_single_all_at_once_step():
    plan = Plan.from_path(chain(), [(0, 1, 2)])
    assert plan.as_planned.flops == plan.user_flops == plan.naive_flops == 360
    assert plan.as_planned.path == ((0, 1, 2),)
    # It runs pairwise, as torch.einsum contracts it: opt_einsum's optimal path over ab,bc,cd.
    assert plan.path == plan_contraction(chain(), "optimal").path
    assert plan.flops == plan_contraction(chain(), "optimal").flops
    assert plan.wide is not None and plan.wide.wide is None


@pytest.mark.parametrize(
    ("path", "match"),
    [
        ([], r"does not contract every operand into one"),
        ([(0, 1)], r"the path leaves 2 tensors; it must contract to one"),
        ([(0,), (0,), (0,)], r"the path leaves 3 tensors"),
        ([(0, 3), (0, 1)], r"path step 0 \(0, 3\) names a position outside 0\.\.2"),
        ([(0, 1), (0, 2)], r"path step 1 \(0, 2\) names a position outside 0\.\.1"),
        ([(-1, 0), (0, 1)], r"path step 0 \(-1, 0\) names a position outside"),
        ([(0, 0), (0, 1)], r"path step 0 \(0, 0\) is empty or repeats a position"),
        ([(), (0, 1, 2)], r"path step 0 \(\) is empty"),
    ],
)
def test_invalid_paths(path, match):
    with pytest.raises(PlanningError, match=match):
        Plan.from_path(chain(), path)
    with pytest.raises(PlanningError, match=match):
        plan_contraction(chain(), path)


# --- optimizers --------------------------------------------------------------------------


def test_optimizers_match_installed_opt_einsum():
    # Asked in a fresh interpreter: importing cotengra (an earlier test's search may have)
    # adds its own optimizers to opt_einsum's registry in this process.
    code = "import opt_einsum; print(' '.join(sorted(opt_einsum.paths._PATH_OPTIONS)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert tuple(done.stdout.split()) == OPTIMIZERS


def test_unknown_optimizer_lists_valid_names():
    match = r"unknown optimizer 'fastest'; choose one of: "
    with pytest.raises(PlanningError, match=match) as info:
        plan_contraction(chain(), "fastest")
    for name in OPTIMIZERS:
        assert name in str(info.value)


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_every_optimizer_plans(name):
    plan = plan_contraction(chain(), name)
    assert plan.optimizer == name
    assert plan.flops in (128, 180, 360)


def test_optimizer_name_is_case_insensitive():
    assert plan_contraction(chain(), "Optimal").optimizer == "optimal"


def test_plan_repr():
    assert repr(plan_contraction(chain(), "optimal")) == (
        "Plan('ab,bc,cd->ad', optimizer='optimal', steps=2, flops=128)"
    )


# --- memory limits -----------------------------------------------------------------------


def test_memory_limit_changes_the_path():
    eq = chain()
    free = plan_contraction(eq, "greedy")
    # greedy alone goes through db (15 elements); a limit of 8 keeps it to ca (8)
    limited = plan_contraction(eq, "greedy", memory_limit=8)
    assert free.path == ((1, 2), (0, 1))
    assert limited.path == ((0, 1), (0, 1))
    expected = opt_einsum.contract_path(
        eq.explicit, *eq.shapes, shapes=True, optimize="greedy", memory_limit=8
    )[0]
    assert limited.path == tuple(tuple(step) for step in expected)


def test_memory_limit_too_small_falls_back_to_one_step():
    plan = plan_contraction(chain(), "optimal", memory_limit=1)
    assert plan.as_planned.path == ((0, 1, 2),)
    assert plan.user_flops == 360
    assert all(len(step.inputs) == 2 for step in plan.steps)


def test_optimizer_failure_without_a_limit_is_a_planning_error(monkeypatch):
    from opt_einsum import paths

    def broken(*args):
        raise RuntimeError("no luck")

    monkeypatch.setitem(paths._PATH_OPTIONS, "dp", broken)
    with pytest.raises(PlanningError, match=r"optimizer 'dp' failed: no luck"):
        plan_contraction(chain(), "dp")


# --- memory limits are a guarantee -------------------------------------------------------

# ea,ac,ce-> with 32x32 matrices: every pairwise step builds a 1,024-element matrix.
TRIANGLE = ("ea,ac,ce->", [(32, 32)] * 3)


def largest_intermediate(plan: Plan) -> int:
    """Largest tensor a step builds, the final output aside (0 when there is none)."""
    return max((step.output_elements for step in plan.as_planned.steps[:-1]), default=0)


def test_random_greedy_over_the_limit_is_replanned_with_greedy():
    eq = parse_equation(*TRIANGLE)
    # What opt_einsum's random-greedy returns under the limit: a 1,024-element step.
    raw = opt_einsum.contract_path(eq.explicit, *eq.shapes, shapes=True,
                                   optimize="random-greedy", memory_limit=64)[0]
    assert largest_intermediate(Plan.from_path(eq, raw)) == 1024
    plan = plan_contraction(eq, "random-greedy", memory_limit=64)
    # greedy under the limit: no pair fits, so all three at once (32**3 * 3 FLOPs).
    assert plan.optimizer == "greedy"
    assert plan.as_planned.path == ((0, 1, 2),)
    assert plan.user_flops == 32**3 * 3 == 98_304
    assert largest_intermediate(plan) == 0
    warning, pairwise = plan.warnings
    assert warning.startswith("random-greedy's path for the forward pass builds an "
                              "intermediate of 1,024 elements")
    assert "over the memory limit of 64 elements; replanned with greedy" in warning
    assert "-> 98,304 FLOPs" in warning
    # What runs instead: two pairwise steps, through a 1,024-element matrix.
    assert plan.path == ((0, 1), (0, 1))
    assert plan.flops == 2 * 32**3 + 2 * 32**2 == 67_584
    assert pairwise == (
        "greedy's path for the forward pass: its last step contracts 3 tensors at once "
        "(98,304 FLOPs); run pairwise, as torch.einsum contracts such a step: 67,584 FLOPs "
        "in all (98,304 as planned), largest intermediate (the output aside) 1,024 "
        "elements, over the memory limit of 64 elements")


def test_dp_that_finds_no_path_under_the_limit_falls_back_to_greedy():
    # opt_einsum's dp raises when no path meets the limit; greedy always finds one.
    plan = plan_contraction(chain(), "dp", memory_limit=1)
    assert plan.optimizer == "greedy"
    assert plan.as_planned.path == ((0, 1, 2),)
    (warning, output, pairwise) = plan.warnings
    assert "run pairwise" in pairwise
    assert warning.startswith("dp found no path for the forward pass under the memory "
                              "limit of 1 elements")
    # The output ad (10 elements) is over the limit too: said, not hidden.
    assert output.startswith("the output of the forward pass has 10 elements, over the "
                             "memory limit of 1 elements")


def test_an_explicit_path_over_the_limit_is_replanned():
    plan = plan_contraction(chain(), [(1, 2), (0, 1)], memory_limit=10)  # builds db: 15
    assert plan.optimizer == "greedy"
    assert plan.path == ((0, 1), (0, 1))  # through ca: 8 elements
    (warning,) = plan.warnings
    assert warning.startswith("the given path for the forward pass builds an intermediate "
                              "of 15 elements (step 0, cd,bc->db), over the memory limit "
                              "of 10 elements")


def test_a_limit_the_path_meets_leaves_it_alone():
    plan = plan_contraction(chain(), "optimal", memory_limit=10)
    assert plan.optimizer == "optimal"
    assert plan.warnings == ()
    assert largest_intermediate(plan) == 8
    # Exactly at the limit is within it: the explicit path through db (15 elements).
    explicit = plan_contraction(chain(), [(1, 2), (0, 1)], memory_limit=15)
    assert (explicit.optimizer, explicit.warnings) == ("explicit", ())
    assert largest_intermediate(explicit) == 15
    assert plan_contraction(chain(), "optimal").warnings == ()


def test_check_memory_limit_when_no_path_meets_it(monkeypatch):
    import einsum_analyze.model.planning as planning

    # A greedy that ignores the limit: the check must say so, not claim the limit met.
    monkeypatch.setattr(planning, "_find_path", lambda eq, name, limit: [(1, 2), (0, 1)])
    plan = planning.check_memory_limit(Plan.from_path(chain(), [(0, 1), (0, 1)]), 4,
                                       note_output=False)
    assert plan.path == ((0, 1), (0, 1))  # 8 elements beats greedy's 15
    (warning,) = plan.warnings
    assert "no path found meets the limit: greedy's largest intermediate has 15 " in warning
    assert "the report uses explicit's path, over the limit" in warning


def test_analyze_reports_the_planning_warnings_and_the_limit_it_met():
    from einsum_analyze import analyze

    report = analyze(*TRIANGLE, optimize="random-greedy", memory_limit=64)
    assert report.plan.optimizer == "greedy"
    assert report.memory_limit_elements == 64
    assert report.warnings[0] == report.plan.warnings[0]
    data = report.to_dict()
    assert data["forward"]["optimizer"] == "greedy"
    assert data["warnings"][0].startswith("random-greedy's path for the forward pass")
    # The gradient contractions of the independent strategy are held to the limit too.
    assert report.gradients is not None
    for core in report.gradients.plans:
        assert largest_intermediate(core) <= 64
    assert any("operand 0's gradient builds an intermediate of 1,024" in w
               for w in report.warnings)
    assert any("operands 1, 2 also broke the memory limit of 64" in w for w in report.warnings)


@pytest.mark.parametrize("optimizer", OPTIMIZERS)
@given(problem=einsum_problems(min_operands=2), limit=st.integers(1, 64))
def test_the_reported_path_never_exceeds_the_limit(optimizer, problem, limit):
    eq = parse_equation(problem.equation, problem.shapes)
    plan = plan_contraction(eq, optimizer, memory_limit=limit)
    biggest = largest_intermediate(plan)
    assert biggest <= limit or any("no path found meets the limit" in w
                                   for w in plan.warnings)
    # What runs is pairwise; where the path as planned is not, a warning says what runs.
    assert all(len(step.inputs) <= 2 for step in plan.steps)
    assert (plan.wide is not None) == any("run pairwise" in w for w in plan.warnings)
    output = plan.steps[-1].output_elements
    assert (output > limit) == any(w.startswith("the output of the forward pass has")
                                   for w in plan.warnings)
    # A warning about breaking the limit appears exactly when the optimizer's own path
    # broke it: compare with opt_einsum's path.
    if eq.num_operands > 2 and optimizer != "greedy":
        try:
            raw = opt_einsum.paths.get_path_fn(optimizer)(
                [frozenset(t) for t in eq.terms], frozenset(eq.output),
                dict(eq.size_dict), limit)
        except RuntimeError:
            raw = None
        broke = raw is None or largest_intermediate(Plan.from_path(eq, raw)) > limit
        assert broke == (plan.optimizer == "greedy")


@pytest.mark.parametrize(
    ("limit", "itemsize", "expected"),
    [
        (None, 4, None),
        (100, 4, 100),
        ("100", 4, 100),  # a bare number is elements, as in opt_einsum
        (" 100 ", 4, 100),
        ("1KiB", 4, 256),
        ("1KiB", 8, 128),
        ("1KB", 4, 250),
        ("512MiB", 2, 2**28),
        ("100B", 4, 25),
        ("4B", 4, 1),
        ("1.5KiB", 4, 384),
    ],
)
def test_parse_memory_limit(limit, itemsize, expected):
    assert parse_memory_limit(limit, chain(), itemsize) == expected


@pytest.mark.parametrize(("limit", "expected"), [("1e3", 1000), ("2.5e6", 2_500_000)])
def test_parse_memory_limit_unitless_float_is_elements(limit, expected):
    assert parse_memory_limit(limit, chain(), 4) == expected


def test_parse_memory_limit_max_input():
    # inputs 6, 12, 20 and output 10 elements
    assert parse_memory_limit("max_input", chain(), 4) == 20
    # an operand with a repeated index holds every element of its shape
    eq = parse_equation("ii,i->i", [(5, 5), (5,)])
    assert parse_memory_limit("max_input", eq, 4) == 25


@pytest.mark.parametrize(
    ("limit", "match"),
    [
        (0, r"memory limit 0 must be a positive number of elements"),
        (-5, r"memory limit -5 must be a positive"),
        ("0", r"memory limit '0' is less than one element"),
        ("3B", r"memory limit '3B' is less than one element"),
        ("lots", r"memory limit 'lots': 'lots' is not a byte size"),
        ("5XB", r"memory limit '5XB': unknown unit 'XB'"),
        ("-1", r"memory limit '-1'"),
        ("MAX_INPUT", r"memory limit 'MAX_INPUT'"),
        (1.5, r"memory limit 1\.5 is not an element count or a byte size"),
        (True, r"memory limit True is not an element count"),
    ],
)
def test_parse_memory_limit_errors(limit, match):
    with pytest.raises(PlanningError, match=match):
        parse_memory_limit(limit, chain(), 4)
