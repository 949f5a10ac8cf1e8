"""The time model's arithmetic against hand-computed figures, and its place in runs."""

from __future__ import annotations

import pytest

from einsum_analyze import analyze
from einsum_analyze.errors import PlanningError
from einsum_analyze.roofline import (
    build_roofline,
    predict_time,
    profile_from_dict,
    step_costs,
)

# 1 GB/s, 2 GFLOP/s, 1 us per kernel: every figure below is hand-computed from these.
UNIT = profile_from_dict({"name": "unit", "bandwidth_bytes_per_s": 1e9, "flops_per_s": 2e9,
                          "launch_s": 1e-6}, "unit")


def test_a_matmul_costs_its_bound_plus_one_kernel():
    # ab,bc->ac at 64: one bmm of 2 x 64^3 = 524,288 FLOPs (262 us at 2 GFLOP/s) reading
    # two and writing one 64 x 64 float32 matrix: 49,152 B (49 us). One kernel: 1 us.
    report = analyze("ab,bc->ac", [(64, 64), (64, 64)], strategies=("reverse",), grad="none")
    s = report.strategies[0]
    t = predict_time(s.events, s.sizes(report.equation.size_dict), 4, UNIT, "float32")
    assert t.launches == 1
    assert t.forward_s == pytest.approx(524_288 / 2e9 + 1e-6)
    assert t.backward_s == 0
    assert (t.profile, t.source) == ("unit", "file")


def test_backward_steps_are_predicted_in_their_phase():
    # Reverse mode on ab,bc->ac at 64, both gradients: two more bmm of the same size.
    report = analyze("ab,bc->ac", [(64, 64), (64, 64)], strategies=("reverse",))
    s = report.strategies[0]
    t = predict_time(s.events, s.sizes(report.equation.size_dict), 4, UNIT, "float32")
    assert t.backward_s == pytest.approx(2 * (524_288 / 2e9 + 1e-6))
    assert t.total_s == pytest.approx(t.forward_s + t.backward_s)


def test_layout_copies_and_sums_are_kernels_and_move_bytes():
    # ijj,k->ik: operand 1's gradient sums the diagonal first (a kernel of its own) then
    # multiplies: two kernels; its predicted time is the bound plus 2 us.
    report = analyze("ijj,k->ik", [(32, 32, 32), (32,)], strategies=("reverse",))
    s = report.strategies[0]
    steps = {c.tensor: c for c in step_costs(s.events, report.equation.size_dict, 4)}
    d1 = steps["d1"]
    assert d1.launches == 2
    assert d1.predicted_s(2e9, 1e9, 1e-6) == pytest.approx(
        d1.bound_s(2e9, 1e9) + d1.copy_bytes / 1e9 + 2e-6)


def test_torch_einsum_steps_count_its_dispatch():
    report = analyze("ab,bc,cd->ad", [(8, 8)] * 3, strategies=("torch-autograd",))
    s = report.strategies[0]
    steps = step_costs(s.events, s.sizes(report.equation.size_dict), 4)
    assert {c.kernel for c in steps} == {"einsum"}
    assert all(c.launches == 1 for c in steps)


def test_the_roofline_section_carries_the_prediction():
    report = analyze("ab,bc->ac", [(64, 64), (64, 64)], strategies=("reverse", "independent"))
    roofline = build_roofline(report, UNIT)
    for row in roofline.strategies:
        s = next(x for x in report.strategies if x.name == row.strategy)
        direct = predict_time(s.events, s.sizes(report.equation.size_dict), 4, UNIT,
                              "float32")
        assert row.predicted == direct
        entry = row.to_dict()
        assert entry["predicted"]["total_s"] == pytest.approx(direct.total_s)
        assert sum(step["predicted_s"] for step in entry["steps"]) == \
            pytest.approx(direct.total_s)


@pytest.mark.parametrize("value", [-1, "1us", True, float("inf")])
def test_a_bad_launch_cost_is_refused(value):
    with pytest.raises(PlanningError, match="launch_s"):
        profile_from_dict({"bandwidth_bytes_per_s": 1e9, "flops_per_s": 1e9,
                           "launch_s": value}, "f.json")


def test_a_profile_without_launch_cost_has_none():
    profile = profile_from_dict({"bandwidth_bytes_per_s": 1e9, "flops_per_s": 1e9}, "f")
    assert profile.launch_s == 0
    assert profile.to_dict()["launch_s"] == 0
