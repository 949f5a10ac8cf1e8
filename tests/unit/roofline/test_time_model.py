"""The time model's arithmetic against hand-computed figures, and its place in runs."""

from __future__ import annotations

from dataclasses import replace

import pytest

from einsum_analyze import analyze
from einsum_analyze.errors import PlanningError
from einsum_analyze.roofline import (
    build_roofline,
    interpolate,
    predict_time,
    profile_from_dict,
    step_costs,
    step_seconds,
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


# Kernel classes with hand-set points: 1 us at the smallest size, then each class's rate.
CLASSES = {
    "bmm": ((1e3, 1e-6), (1e9, 1e-2)),       # 100 GFLOP/s at 1 GFLOP
    "skinny": ((1e3, 1e-6), (1e9, 1e-1)),    # 10 GB/s at 1 GB
    "matvec": ((1e3, 1e-6), (1e9, 4e-1)),    # 2.5 GB/s
    "outer": ((1e3, 1e-6), (1e9, 8e-1)),     # 1.25 GB/s
    "mul": ((1e3, 1e-6), (1e9, 5e-2)),       # 20 GB/s
    "reduce": ((1e3, 1e-6), (1e9, 1e-1)),
    "copy": ((1e3, 1e-6), (1e9, 2e-1)),      # 5 GB/s
}
CLASSED = replace(UNIT, kernel_times=CLASSES)


def test_interpolation_is_log_log_between_points_and_proportional_beyond():
    points = ((1e3, 1e-6), (1e9, 1e-2))
    assert interpolate(points, 10) == 1e-6  # below the smallest: its time
    # Halfway in log work (1e6) is halfway in log time: sqrt(1e-6 * 1e-2) = 1e-4.
    assert interpolate(points, 1e6) == pytest.approx(1e-4)
    assert interpolate(points, 4e9) == pytest.approx(4e-2)


def test_a_product_takes_the_slower_of_its_square_and_skinny_classes():
    report = analyze("ab,bc->ac", [(64, 64), (64, 64)], strategies=("reverse",), grad="none")
    s = report.strategies[0]
    (step,) = step_costs(s.events, s.sizes(report.equation.size_dict), 4)
    expected = max(interpolate(CLASSES["bmm"], step.flops),
                   interpolate(CLASSES["skinny"], step.bytes))
    assert step_seconds(step, CLASSED, "float32") == pytest.approx(expected)
    t = predict_time(s.events, s.sizes(report.equation.size_dict), 4, CLASSED, "float32")
    assert t.forward_s == pytest.approx(expected)


def test_a_matrix_vector_product_summing_two_takes_the_matvec_class():
    # bd,bdm->bm at b=64, m=32: one product of 64 (32 x 2) matrices by 2-vectors, under
    # the narrow size, so one bmm; and torch's own execution of the same product
    report = analyze("bd,bdm->bm", [(64, 2), (64, 2, 32)], strategies=("reverse",),
                     grad="none")
    s = report.strategies[0]
    (step,) = step_costs(s.events, s.sizes(report.equation.size_dict), 4)
    assert step.kernel == "bmm" and step.vector
    assert step_seconds(step, CLASSED, "float32") == pytest.approx(
        interpolate(CLASSES["matvec"], step.bytes))
    torch_model = analyze("bd,bdm->bm", [(64, 2), (64, 2, 32)],
                          strategies=("torch-autograd",), grad="none").strategies[0]
    (theirs,) = step_costs(torch_model.events,
                           torch_model.sizes(report.equation.size_dict), 4)
    assert theirs.runner == "torch" and theirs.vector
    # a square product is no vector product, and without the class nothing changes
    square = analyze("ab,bc->ac", [(64, 64), (64, 64)], strategies=("reverse",),
                     grad="none").strategies[0]
    assert not step_costs(square.events, square.sizes({"a": 64, "b": 64, "c": 64}), 4)[0].vector
    without = replace(CLASSED, kernel_times={k: v for k, v in CLASSES.items() if k != "matvec"})
    assert step_seconds(step, without, "float32") == pytest.approx(max(
        interpolate(CLASSES["bmm"], step.flops), interpolate(CLASSES["skinny"], step.bytes)))


def test_torch_s_batched_outer_product_takes_the_outer_class():
    # bz,bk->bzk at b=64, z=8, k=32: torch runs it as one bmm of (64, 8, 1) by (64, 1, 32)
    report = analyze("bz,bk->bzk", [(64, 8), (64, 32)], strategies=("torch-autograd",),
                     grad="none")
    s = report.strategies[0]
    (step,) = step_costs(s.events, s.sizes(report.equation.size_dict), 4)
    assert step.runner == "torch" and step.outer and not step.vector
    assert step_seconds(step, CLASSED, "float32") == pytest.approx(
        interpolate(CLASSES["outer"], step.bytes))
    without = replace(CLASSED, kernel_times={k: v for k, v in CLASSES.items() if k != "outer"})
    assert step_seconds(step, without, "float32") < step_seconds(step, CLASSED, "float32")
    # a contraction, a product without a batch and one with a single right element are not
    for equation, shapes in (("bz,bz->b", [(64, 8), (64, 8)]), ("z,k->zk", [(8,), (32,)]),
                             ("bz,bk->bzk", [(64, 8), (64, 1)])):
        other = analyze(equation, shapes, strategies=("torch-autograd",),
                        grad="none").strategies[0]
        sizes = other.sizes(analyze(equation, shapes, grad="none").equation.size_dict)
        assert not any(cost.outer for cost in step_costs(other.events, sizes, 4)), equation


def test_an_unreduce_is_priced_as_a_copy_and_extra_kernels_at_launch_cost():
    report = analyze("ijj,k->ik", [(32, 32, 32), (32,)], strategies=("reverse",))
    s = report.strategies[0]
    steps = step_costs(s.events, s.sizes(report.equation.size_dict), 4)
    for step in steps:
        seconds = step_seconds(step, CLASSED, "float32")
        if step.kernel == "unreduce":
            assert seconds == pytest.approx(interpolate(CLASSES["copy"], step.bytes))
        if step.kernel == "mul" and step.launches == 2 and not step.copy_bytes:
            # The diagonal's sum first: one more kernel at launch_s.
            assert seconds == pytest.approx(interpolate(CLASSES["mul"], step.bytes) + 1e-6)
    roofline = build_roofline(report, CLASSED).strategy("reverse")
    assert sum(step["predicted_s"] for step in roofline.to_dict()["steps"]) == \
        pytest.approx(roofline.predicted.total_s)


def test_a_sum_is_one_kernel():
    # ii-> in reverse: the forward's step sums the diagonal into the output, one kernel
    # (torch.sum over the diagonal's view), not a sum and then a product.
    report = analyze("ii->", [(16, 16)], strategies=("reverse",))
    s = report.strategies[0]
    (forward,) = [c for c in step_costs(s.events, s.sizes(report.equation.size_dict), 4)
                  if c.phase == "forward"]
    assert (forward.kernel, forward.launches) == ("reduce", 1)
    assert forward.predicted_s(2e9, 1e9, 1e-6) == pytest.approx(
        forward.bound_s(2e9, 1e9) + 1e-6)
