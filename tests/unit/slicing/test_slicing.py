"""Slice plans, the finders, the sliced strategy's registration and its place in the search."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner

from einsum_analyze import analyze, parse_equation, plan_contraction
from einsum_analyze.cli import cli
from einsum_analyze.errors import PlanningError
from einsum_analyze.report import load_schema
from einsum_analyze.search import floor_bytes
from einsum_analyze.slicing import (
    SlicePlan,
    find_slices,
    part_is_contiguous,
    score_slices,
    sliced_schedule,
)
from einsum_analyze.strategies import build_strategy, default_strategy_names, get_strategy

CASES = {c["name"]: c for c in json.loads(
    (Path(__file__).parents[3] / "benchmarks" / "cases.json").read_text())["cases"]}
TN = ("bc,bd,cm,mdn->bn", [(512, 2), (512, 2), (2, 7), (7, 2, 7)])


def _plan(equation: str, shapes: Any) -> Any:
    return plan_contraction(parse_equation(equation, shapes))


# --- SlicePlan ---------------------------------------------------------------------------------


def test_ranges_are_row_major_and_cover_every_index_once() -> None:
    plan = SlicePlan(("b", "n"), (5, 3), (2, 2))
    assert plan.counts == (3, 2) and plan.count == 6
    assert [plan.ranges(k) for k in (0, 1, 5)] == [
        (("b", 0, 2), ("n", 0, 2)), (("b", 0, 2), ("n", 2, 3)), (("b", 4, 5), ("n", 2, 3))]
    covered = sorted((b, n) for k in plan for (_, b0, b1), (_, n0, n1) in [plan.ranges(k)]
                     for b in range(b0, b1) for n in range(n0, n1))
    assert covered == [(b, n) for b in range(5) for n in range(3)]
    assert {lengths: len(ks) for lengths, ks in plan.shapes().items()} == {
        (2, 2): 2, (2, 1): 2, (1, 2): 1, (1, 1): 1}
    with pytest.raises(IndexError):
        plan.ranges(6)


def test_bad_plans_are_refused() -> None:
    with pytest.raises(ValueError, match="twice"):
        SlicePlan(("a", "a"), (2, 2), (1, 1))
    with pytest.raises(ValueError, match="chunks of 0"):
        SlicePlan(("a",), (2,), (0,))
    with pytest.raises(PlanningError, match="no such index"):
        SlicePlan.of({"z": 1}, {"a": 2})
    assert SlicePlan.none().count == 1


def test_part_contiguity() -> None:
    sizes = {"a": 4, "b": 3, "c": 2}
    assert part_is_contiguous("abc", sizes, {"a": 2})
    assert not part_is_contiguous("abc", sizes, {"b": 2})
    assert part_is_contiguous("abc", sizes, {"a": 1, "b": 2})  # a length-1 axis is no gap
    assert not part_is_contiguous("aa", {"a": 4}, {"a": 2})  # a diagonal's block
    assert part_is_contiguous("ab", sizes, {})


# --- the schedule ------------------------------------------------------------------------------


def test_a_subset_of_one_slice_per_length_has_the_step_peak() -> None:
    plan = _plan(*TN)
    slices = SlicePlan.of({"b": 200, "n": 3}, plan.equation.size_dict)
    full = build_strategy("sliced", plan, [0, 1, 2, 3], itemsize=4,
                          options={"indices": {"b": 200, "n": 3}})
    score = score_slices(plan, slices, [0, 1, 2, 3], itemsize=4)
    assert score.peak_bytes == full.memory.peak_bytes
    assert score.flops == full.forward_flops + full.backward_flops
    assert score.copies == sum(e.op == "slice_copy" for e in full.events)


def test_unknown_per_slice_strategy_and_slice_numbers() -> None:
    plan = _plan(*TN)
    slices = SlicePlan.of({"n": 3}, plan.equation.size_dict)
    with pytest.raises(PlanningError, match="cannot run"):
        sliced_schedule(plan, slices, [0], itemsize=4, strategy="independent")
    with pytest.raises(PlanningError, match="does not exist"):
        sliced_schedule(plan, slices, [0], itemsize=4, slice_ids=[3])
    with pytest.raises(PlanningError, match="no such index"):
        build_strategy("sliced", plan, [0], itemsize=4, options={"indices": "q:2"})
    with pytest.raises(PlanningError, match="positive chunk"):
        build_strategy("sliced", plan, [0], itemsize=4, options={"indices": "n:0"})


def test_unfused_costs_one_more_forward() -> None:
    plan = _plan(*TN)
    grad = [0, 1, 2, 3]
    fused = build_strategy("sliced", plan, grad, itemsize=4, options={"indices": "n:3"})
    unfused = build_strategy("sliced", plan, grad, itemsize=4,
                             options={"indices": "n:3", "fused": False})
    assert unfused.forward_flops == fused.forward_flops
    assert unfused.backward_flops > fused.backward_flops
    assert not unfused.details["slicing"]["fused"] and fused.details["slicing"]["fused"]


# --- the finders -------------------------------------------------------------------------------


def test_no_budget_or_a_fitting_one_slices_nothing() -> None:
    plan = _plan(*TN)
    choice = find_slices(plan, [0, 1, 2, 3], itemsize=4, budget_bytes=None)
    assert choice.finder == "none" and choice.best.slices.count == 1
    assert choice.fits is None
    roomy = find_slices(plan, [0, 1, 2, 3], itemsize=4, budget_bytes=10**9)
    assert roomy.fits and roomy.best.slices.count == 1


def test_greedy_fits_a_budget_reverse_cannot() -> None:
    plan = _plan(*TN)
    grad = [0, 1, 2, 3]
    reverse = build_strategy("reverse", plan, grad, itemsize=4)
    floor = floor_bytes(plan.equation, grad, 4)
    budget = (floor + reverse.memory.peak_bytes) // 2 + 8192
    choice = find_slices(plan, grad, itemsize=4, budget_bytes=budget, finder="greedy")
    assert choice.fits and choice.best.peak_bytes <= budget < reverse.memory.peak_bytes
    assert choice.best.slices.count > 1
    # Every halving the greedy tried that fits costs at least what it chose.
    result = build_strategy("sliced", plan, grad, itemsize=4,
                            options={"budget_bytes": budget, "finder": "greedy"})
    assert result.memory.peak_bytes == choice.best.peak_bytes
    assert result.details["slicing"]["fits_budget"] is True


def test_an_unreachable_budget_gives_the_least_peak_found() -> None:
    plan = _plan(*TN)
    grad = [0, 1, 2, 3]
    floor = floor_bytes(plan.equation, grad, 4)
    choice = find_slices(plan, grad, itemsize=4, budget_bytes=floor // 2, finder="greedy",
                         max_slices=64)
    assert choice.fits is False
    assert choice.best == choice.smallest
    assert floor < choice.smallest.peak_bytes < build_strategy(
        "reverse", plan, grad, itemsize=4).memory.peak_bytes
    assert choice.best.slices.count <= 64
    result = build_strategy("sliced", plan, grad, itemsize=4,
                            options={"budget_bytes": floor // 2, "finder": "greedy"})
    assert any("smallest training peak it reaches" in w for w in result.warnings)


@pytest.mark.skipif(importlib.util.find_spec("cotengra") is None, reason="cotengra extra")
def test_cotengra_proposals_are_scored_by_our_model() -> None:
    case = CASES["mps-layer"]
    plan = _plan(case["equation"], case["shapes"])
    grad = list(range(8))
    budget = int(9.87 * 2**20)
    choice = find_slices(plan, grad, itemsize=4, budget_bytes=budget, finder="cotengra")
    assert choice.finder == "cotengra" and choice.fits
    assert choice.best == score_slices(plan, choice.best.slices, grad, itemsize=4)


# --- the strategy, the search, the report ------------------------------------------------------


def test_registered_for_budgets_not_by_default() -> None:
    spec = get_strategy("sliced")
    assert "sliced" not in default_strategy_names()
    assert spec.fallback and spec.lowered and spec.dropin_options == {"fused": False}


def test_mps_layer_midpoint_budget_is_met_by_slicing() -> None:
    # Below recompute's 9.86 MiB (the least unsliced peak on mps-layer; the
    # training-plans issue's budget B was 9.87 MiB, which recompute now meets).
    case = CASES["mps-layer"]
    budget = int(9.8 * 2**20)
    report = analyze(case["equation"], case["shapes"], budget=budget,
                     strategies=["reverse", "checkpoint", "sliced"], max_search_s=None)
    rec = report.recommended
    assert rec is not None and rec.fits and rec.plan.strategy == "sliced"
    assert rec.plan.peak_bytes <= budget
    section = rec.plan.result.details["slicing"]
    assert section["overhead_ratio"] < 1.15
    unsliced = [p for p in report.search.pareto if p.strategy != "sliced"]
    assert min(p.peak_bytes for p in unsliced) > budget


def test_the_search_leaves_slicing_out_when_another_plan_fits() -> None:
    report = analyze(*TN, budget=10**6, strategies=["reverse", "sliced"], max_search_s=None)
    assert report.recommended is not None and report.recommended.fits
    assert all(p.strategy != "sliced" for p in report.search.pareto)


def test_json_section_validates() -> None:
    report = analyze(*TN, strategies=["reverse", "sliced"],
                     strategy_options={"sliced": {"indices": "b:100,n:3"}})
    data = report.to_dict()
    jsonschema.Draft202012Validator(load_schema()).validate(data)
    (entry,) = [s for s in data["strategies"] if s["name"] == "sliced"]
    section = entry["slicing"]
    assert section["count"] == math.ceil(512 / 100) * math.ceil(7 / 3)
    assert section["peak_bytes_with_accumulators"] == entry["peak_bytes"]
    assert section["flops"] == entry["total_flops"]


def test_cli_budget_below_reach_exits_1_with_the_smallest_peak() -> None:
    args = [TN[0], "--shapes", "512x2,512x2,2x7,7x2x7", "--device", "none",
            "--strategy", "reverse,sliced", "--budget", "20KiB"]
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 1
    assert "smallest reachable" in result.output + result.stderr


def test_the_dropin_runs_the_unfused_form_within_a_budget() -> None:
    import torch

    from einsum_analyze.torch import einsum

    generator = torch.Generator().manual_seed(0)
    operands = [torch.randn(s, generator=generator, dtype=torch.float64, requires_grad=True)
                for s in TN[1]]
    reverse = build_strategy("reverse", _plan(*TN), [0, 1, 2, 3], itemsize=8)
    budget = int(reverse.memory.peak_bytes * 0.9)
    chosen = build_strategy("sliced", _plan(*TN), [0, 1, 2, 3], itemsize=8,
                            options={"budget_bytes": budget, "fused": False})
    assert chosen.details["slicing"]["count"] > 1 and chosen.memory.peak_bytes <= budget
    y = einsum(TN[0], *operands, strategy="sliced", budget=budget)
    upstream = torch.randn(y.shape, generator=generator, dtype=torch.float64)
    got = torch.autograd.grad(y, operands, upstream)
    leaves = [o.detach().clone().requires_grad_(True) for o in operands]
    want_y = torch.einsum(TN[0], *leaves)
    want = torch.autograd.grad(want_y, leaves, upstream)
    torch.testing.assert_close(y, want_y)
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b)
