"""The recompute strategy on mps-layer: what it remakes, its peak, its run, the search's pick.

mps-layer's forward step 5 is the outer product ``nlk,nji->nlkji`` (4 MiB at full size),
read by step 6's gradient of ``lvkjai``. Reverse mode keeps it from forward to backward;
recompute remakes it from ``nlk`` and ``nji`` (kept anyway) after step 5's gradients
have used and freed its gradient. Oracle and held-byte checks over the corpus and
random equations are in tests/property/test_recompute_oracle.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from einsum_analyze import analyze, execute
from einsum_analyze.errors import PlanningError
from einsum_analyze.search.recommend import PEAK_PRICE, TIME_SLACK
from einsum_analyze.strategies import build_strategy
from einsum_analyze.strategies.recompute import recompute_candidates

CASES = {c["name"]: c for c in json.loads(
    (Path(__file__).parents[3] / "benchmarks" / "cases.json").read_text())["cases"]}
MPS = CASES["mps-layer"]


def scaled(shapes: list[list[int]]) -> list[list[int]]:
    """Dims of 64 and above divided by 8, as tests/unit/search/test_recommended_cpu.py does."""
    return [[max(1, d // 8) if d >= 64 else d for d in shape] for shape in shapes]


def outer_product_id(report) -> int:
    [step] = [s for s in report.plan.steps if s.equation == "nlk,nji->nlkji"]
    return step.output


def test_it_remakes_the_outer_product_and_lowers_the_peak():
    report = analyze(MPS["equation"], MPS["shapes"],
                     strategies=["reverse", "checkpoint", "recompute", "torch-autograd"])
    by_name = {s.name: s for s in report.strategies}
    outer = outer_product_id(report)
    grad = list(range(8))
    assert outer in recompute_candidates(report.plan, grad)
    recompute = by_name["recompute"]
    assert outer in recompute.details["recompute"]["recomputed"]
    remade = [e for e in recompute.events if e.recompute]
    assert "nlk,nji->nlkji" in [e.equation for e in remade]
    assert recompute.details["recompute"]["recompute_flops"] == sum(e.flops for e in remade)
    # What is remade is not retained: the retained bytes drop by its size at least.
    freed = sum(e.elements for e in remade) * 4
    assert recompute.memory.retained_bytes <= by_name["reverse"].memory.retained_bytes - freed
    for other in ("reverse", "checkpoint", "torch-autograd"):
        assert recompute.memory.peak_bytes < by_name[other].memory.peak_bytes, other


def test_its_gradient_of_the_outer_product_is_freed_before_the_remake():
    report = analyze(MPS["equation"], scaled(MPS["shapes"]), strategies=["recompute"])
    events = report.strategies[0].events
    outer = f"x{outer_product_id(report)}"
    remake = next(n for n, e in enumerate(events) if e.recompute and e.tensor == outer)
    freed = [n for n, e in enumerate(events) if e.kind == "free" and e.tensor == f"g{outer[1:]}"]
    assert len(freed) == 1 and freed[0] < remake


@pytest.mark.parametrize(("shapes", "dtype"), [(scaled(MPS["shapes"]), "float64"),
                                               (MPS["shapes"], "float32")],
                         ids=["scaled-float64", "full-float32"])
def test_measured_peak_equals_predicted_on_cpu(shapes, dtype):
    report = analyze(MPS["equation"], shapes, dtype=dtype, strategies=["reverse", "recompute"])
    ran = execute(report, devices=["cpu"], repeats=1, warmup=0)
    runs = {r.strategy: r for r in ran.runs if not r.is_baseline}
    tolerance = 1e-12 if dtype == "float64" else 1e-5
    for run in runs.values():
        assert run.skipped is None, run.skipped
        assert run.max_grad_error is not None and run.max_grad_error < tolerance
        assert run.peak_bytes_measured == run.peak_bytes_predicted, run.strategy
    assert runs["recompute"].peak_bytes_measured < runs["reverse"].peak_bytes_measured


def test_the_recommendation_takes_it_without_a_budget():
    # No search deadline: which plan is found must not depend on the machine's load.
    report = analyze(MPS["equation"], MPS["shapes"], strategies=["reverse", "torch-autograd"],
                     objective="time", max_search_s=None)
    assert report.recommended is not None and report.search is not None
    plan = report.recommended.plan
    assert plan.strategy == "recompute"
    torch_peak = {s.name: s for s in report.strategies}["torch-autograd"].memory.peak_bytes
    assert plan.peak_bytes <= torch_peak
    fastest = min(report.search.pareto, key=lambda p: p.predicted_s)
    saving = 1 - plan.peak_bytes / fastest.peak_bytes
    assert plan.predicted_s <= fastest.predicted_s * (1 + min(TIME_SLACK, PEAK_PRICE * saving))
    # A faster plan exists; the recommendation trades a little time for the lower peak.
    assert any(p.predicted_s < plan.predicted_s and p.peak_bytes > plan.peak_bytes
               for p in report.search.pareto)


def test_without_gradients_nothing_is_recomputed():
    report = analyze(MPS["equation"], scaled(MPS["shapes"]), strategies=["recompute"], grad=[])
    result = report.strategies[0]
    assert result.details["recompute"]["recomputed"] == []
    assert not any(e.recompute for e in result.events)


@pytest.mark.parametrize(("ids", "match"), [
    ([99], "cannot be recomputed; candidates:"),
    (None, "read by one step"),
])
def test_a_set_it_cannot_run_is_refused(ids, match):
    report = analyze(MPS["equation"], scaled(MPS["shapes"]), strategies=["reverse"])
    plan = report.plan
    if ids is None:  # both inputs of the last step
        ids = [i for i in plan.steps[-1].inputs if i in recompute_candidates(plan, range(8))]
        assert len(ids) == 2
    with pytest.raises(PlanningError, match=match):
        build_strategy("recompute", plan, list(range(8)), itemsize=8,
                       options={"recompute": ids})


def test_the_other_input_of_the_step_goes_before_the_outer_products_gradients():
    # lvkjai (step 6's other input) is read only by the gradient of nlkji: freed then.
    report = analyze(MPS["equation"], scaled(MPS["shapes"]), strategies=["recompute"])
    events = report.strategies[0].events
    [other] = [i for i in report.plan.steps[-1].inputs if i != outer_product_id(report)]
    outer = outer_product_id(report)
    freed = next(n for n, e in enumerate(events) if e.kind == "free" and e.tensor == f"x{other}")
    made = next(n for n, e in enumerate(events) if e.tensor == f"g{outer}")
    remade = next(n for n, e in enumerate(events) if e.recompute)
    assert made < freed < remade


@pytest.mark.parametrize("depth_first", [False, True])
def test_both_orders_measure_their_prediction_on_cpu(depth_first):
    report = analyze(MPS["equation"], scaled(MPS["shapes"]), dtype="float64",
                     strategies=["recompute"],
                     strategy_options={"recompute": {"depth_first": depth_first}})
    [result] = report.strategies
    assert result.details["recompute"]["depth_first"] is depth_first
    ran = execute(report, devices=["cpu"], repeats=1, warmup=0)
    [run] = [r for r in ran.runs if not r.is_baseline]
    assert run.skipped is None, run.skipped
    assert run.max_grad_error is not None and run.max_grad_error < 1e-12
    assert run.peak_bytes_measured == run.peak_bytes_predicted


def test_the_strategy_takes_the_order_of_the_lower_peak():
    peaks = {}
    for depth_first in (False, True, None):
        report = analyze(MPS["equation"], MPS["shapes"], strategies=["recompute"],
                         strategy_options={"recompute": {"depth_first": depth_first}})
        peaks[depth_first] = report.strategies[0].memory.peak_bytes
    # Below nlkji's gradient, the gradients of nlk and nji are taken down to the
    # operands one at a time (each 256 KiB), not held together.
    assert peaks[True] < peaks[False]
    assert peaks[None] == peaks[True]
