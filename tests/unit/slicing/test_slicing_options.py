"""The sliced strategy's options: every bad value is a PlanningError naming it."""

from __future__ import annotations

import pytest

from einsum_analyze import analyze
from einsum_analyze.errors import PlanningError

SHAPES = [[4, 5], [5, 6]]


@pytest.mark.parametrize(("options", "culprit"), [
    ({"indices": 3}, "sliced indices 3"),
    ({"indices": "i:2,i:3"}, "name 'i' twice"),
    ({"indices": {"i": True}}, "'i':True"),
    ({"indices": {"i": 2.5}}, "'i':2.5"),
    ({"indices": {"i": 0}}, "'i':0"),
    ({"fused": "yes"}, "fused 'yes'"),
    ({"budget_bytes": 0}, "budget_bytes 0"),
    ({"budget_bytes": -1}, "budget_bytes -1"),
    ({"budget_bytes": float("nan")}, "budget_bytes nan"),
    ({"budget_bytes": float("inf")}, "budget_bytes inf"),
    ({"budget_bytes": True}, "budget_bytes True"),
    ({"budget_bytes": "1e400"}, "'1e400' is too large"),
    ({"budget_bytes": "lots"}, "'lots' is not a byte size"),
])
def test_bad_sliced_options_are_planning_errors(options: dict[str, object],
                                                culprit: str) -> None:
    with pytest.raises(PlanningError, match="sliced") as caught:
        analyze("ij,jk->ik", SHAPES, strategies=("sliced",),
                strategy_options={"sliced": options})
    assert culprit in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("budget", [70_500, 70_500.0, "70500B"])
def test_good_budgets_slice_alike(budget: object) -> None:
    # Unsliced, the step peaks at 71,200 B; slicing j fits 70,500 B.
    report = analyze("ij,jk->ik", [[40, 50], [50, 60]], strategies=("sliced",),
                     strategy_options={"sliced": {"budget_bytes": budget}})
    section = report.strategies[0].details["slicing"]
    assert section["budget_bytes"] == 70_500
    assert section["count"] > 1 and section["peak_bytes_with_accumulators"] <= 70_500


def test_the_greedy_looks_past_a_first_halving_that_raises_the_peak() -> None:
    from einsum_analyze import parse_equation, plan_contraction
    from einsum_analyze.slicing import find_slices

    plan = plan_contraction(parse_equation("ij,jk->ik", [[40, 50], [50, 60]]))
    # Unsliced 71,200 B; halving j alone needs part copies (72,800 B); j:5 is 69,600 B.
    choice = find_slices(plan, [0, 1], itemsize=4, budget_bytes=70_000)
    assert choice.fits and choice.best.peak_bytes <= 70_000
    assert choice.best.slices.count > 1
