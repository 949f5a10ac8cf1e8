"""The time model's host terms: their shape, their growth, their JSON, the nominal figures."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

from einsum_analyze import analyze
from einsum_analyze.errors import PlanningError
from einsum_analyze.roofline import (
    NOMINAL,
    HostCosts,
    gradient_nodes,
    host_kernel_seconds,
    interpolate,
    kernel_seconds,
    predict_time,
    profile_from_dict,
    step_costs,
    step_times,
)

# Rates so high that every kernel costs nothing: what is left is the host's.
FREE = profile_from_dict({"name": "free", "bandwidth_bytes_per_s": 1e30,
                          "flops_per_s": 1e30}, "free")
HOST = HostCosts(forward_step_s=1e-6, backward_step_s=3e-6, forward_run_s=2e-6,
                 backward_run_s=5e-6, forward_kind_s=4e-7, backward_kind_s=9e-6,
                 forward_label_s=1e-7, backward_label_s=2e-7,
                 torch_forward=((2, 1e-5), (4, 1e-4), (8, 4e-4)),
                 torch_node_s=2e-5, torch_backward_s=7e-5)
HOSTED = replace(FREE, host=HOST)


def _predicted(equation, shapes, strategy, profile=HOSTED):
    report = analyze(equation, shapes, strategies=(strategy,))
    s = report.strategies[0]
    sizes = s.sizes(report.equation.size_dict)
    return predict_time(s.events, sizes, 4, profile, "float32"), step_costs(s.events, sizes, 4)


def test_our_executor_pays_per_step_and_per_run_of_each_phase():
    # Reverse mode on ab,bc->ac: one forward step, two backward steps.
    t, steps = _predicted("ab,bc->ac", [(4, 4), (4, 4)], "reverse")
    forward = [c for c in steps if c.phase == "forward"]
    backward = [c for c in steps if c.phase == "backward"]
    assert (len(forward), len(backward)) == (1, 2)
    assert {c.runner for c in steps} == {"executor"}
    # Each step's terms: ab,bc->ac (6 labels); ac,bc->ab and ab,ac->bc in backward.
    assert [c.labels for c in steps] == [6, 6, 6]
    assert t.forward_s == pytest.approx(2e-6 + 1 * (1e-6 + 6 * 1e-7), rel=1e-9)
    assert t.backward_s == pytest.approx(5e-6 + 2 * (3e-6 + 6 * 2e-7), rel=1e-9)


def test_a_step_of_more_labels_pays_more_host():
    # The same product with three batch labels more on every term: 9 labels more a step.
    narrow, narrow_steps = _predicted("ab,bc->ac", [(2, 2), (2, 2)], "reverse")
    wide, wide_steps = _predicted("xyzab,xyzbc->xyzac", [(1, 1, 1, 2, 2)] * 2, "reverse")
    assert [c.labels for c in wide_steps] == [c.labels + 9 for c in narrow_steps]
    assert wide.forward_s - narrow.forward_s == pytest.approx(9 * 1e-7, rel=1e-6)
    assert wide.backward_s - narrow.backward_s == pytest.approx(2 * 9 * 2e-7, rel=1e-6)


def test_each_kind_of_step_other_than_a_product_costs_its_phase_once():
    # ijj,k->ik in reverse mode: one forward step (a broadcast product, one kind other
    # than a product); backward has products and an unreduce: one such kind. The
    # calibration prices a kind against its chains of products.
    t, steps = _predicted("ijj,k->ik", [(4, 4, 4), (4,)], "reverse")
    forward = [c for c in steps if c.phase == "forward"]
    backward = [c for c in steps if c.phase == "backward"]
    assert [c.kernel for c in forward] == ["mul"]
    kinds = {c.kernel for c in backward}
    assert kinds == {"bmm", "unreduce"}
    labels = {phase: sum(c.labels for c in steps if c.phase == phase)
              for phase in ("forward", "backward")}
    assert t.forward_s == pytest.approx(
        2e-6 + len(forward) * 1e-6 + labels["forward"] * 1e-7 + 4e-7, rel=1e-9)
    assert t.backward_s == pytest.approx(
        5e-6 + len(backward) * 3e-6 + labels["backward"] * 2e-7 + 9e-6, rel=1e-9)


def test_torch_einsum_pays_its_call_at_its_operands_and_autograd_per_node():
    # torch.einsum of three operands: its forward call is the figure at 3 operands,
    # interpolated log-log between 2 and 4; backward: the engine and one node per
    # gradient contraction.
    t, steps = _predicted("ab,bc,cd->ad", [(4, 4)] * 3, "torch-autograd")
    assert {c.runner for c in steps} == {"torch"}
    assert {c.call_operands for c in steps} == {3}
    nodes = sum(c.phase == "backward" for c in steps)
    assert nodes == 4  # two per pairwise step: every operand's gradient
    assert t.forward_s == pytest.approx(interpolate(HOST.torch_forward, 3), rel=1e-9)
    # log-log: at log2(3/2) of the way from 2 to 4 operands, 1e-5 to 1e-4 seconds.
    assert interpolate(HOST.torch_forward, 3) == pytest.approx(1e-5 * 10 ** math.log2(1.5))
    assert t.backward_s == pytest.approx(7e-5 + nodes * 2e-5, rel=1e-9)


def test_a_profile_without_host_costs_predicts_the_kernels_alone():
    t, _ = _predicted("ab,bc->ac", [(4, 4), (4, 4)], "reverse", FREE)
    assert t.total_s == pytest.approx(0, abs=1e-20)
    t, _ = _predicted("ab,bc,cd->ad", [(4, 4)] * 3, "torch-autograd", FREE)
    assert t.total_s == pytest.approx(0, abs=1e-20)


def test_the_phase_costs_go_to_each_phases_first_step():
    report = analyze("ab,bc,cd->ad", [(4, 4)] * 3, strategies=("reverse",))
    s = report.strategies[0]
    steps = step_costs(s.events, s.sizes(report.equation.size_dict), 4)
    seconds = step_times(steps, HOSTED, "float32")
    first = {phase: next(n for n, c in enumerate(steps) if c.phase == phase)
             for phase in ("forward", "backward")}
    for n, (step, time_s) in enumerate(zip(steps, seconds, strict=True)):
        own = (HOST.forward_step_s + step.labels * HOST.forward_label_s
               if step.phase == "forward"
               else HOST.backward_step_s + step.labels * HOST.backward_label_s)
        run = HOST.forward_run_s if step.phase == "forward" else HOST.backward_run_s
        assert time_s == pytest.approx(own + (run if n == first[step.phase] else 0.0))
    t = predict_time(s.events, s.sizes(report.equation.size_dict), 4, HOSTED, "float32")
    assert sum(seconds) == pytest.approx(t.total_s)


@pytest.mark.parametrize("field", ["forward_step_s", "backward_step_s", "forward_run_s",
                                   "backward_run_s", "forward_kind_s", "backward_kind_s",
                                   "forward_label_s", "backward_label_s",
                                   "torch_node_s", "torch_backward_s"])
def test_more_host_cost_predicts_more_for_its_runner_and_the_same_for_the_other(field):
    dearer = replace(HOSTED, host=replace(HOST, **{field: getattr(HOST, field) * 10}))
    pays = "torch-autograd" if field.startswith("torch") else "reverse"
    # ijj,k,kl->il: a product and a broadcast product in forward, several kinds in
    # backward, so every term counts.
    case = ("ijj,k,kl->il", [(4, 4, 4), (4,), (4, 4)])
    for strategy in ("reverse", "torch-autograd"):
        cheap, _ = _predicted(*case, strategy)
        dear, _ = _predicted(*case, strategy, dearer)
        if strategy == pays:
            assert dear.total_s > cheap.total_s
        else:
            assert dear.total_s == cheap.total_s


def test_more_steps_cost_the_host_more():
    # A longer chain has more steps: more of every per-step cost, the same per run.
    shorter, _ = _predicted("ab,bc,cd->ad", [(4, 4)] * 3, "reverse")
    longer, _ = _predicted("ab,bc,cd,de->ae", [(4, 4)] * 4, "reverse")
    assert longer.forward_s > shorter.forward_s and longer.backward_s > shorter.backward_s


def test_host_costs_round_trip_through_a_profiles_json():
    entry = json.loads(json.dumps(HOSTED.to_dict("float32")))
    again = profile_from_dict(entry, "saved.json")
    assert again.host == HOST
    for strategy in ("reverse", "torch-autograd"):
        want, _ = _predicted("ab,bc,cd->ad", [(4, 4)] * 3, strategy)
        got, _ = _predicted("ab,bc,cd->ad", [(4, 4)] * 3, strategy, again)
        assert got.total_s == pytest.approx(want.total_s)


@pytest.mark.parametrize(("host", "culprit"), [
    ({"forward_step_s": -1}, "host.forward_step_s"),
    ({"torch_node_s": "1us"}, "host.torch_node_s"),
    ({"backward_run_s": True}, "host.backward_run_s"),
    ({"torch_forward": [[2, 1e-5], [2, 2e-5]]}, "ascending"),
    ({"torch_forward": [[2, 0]]}, "above 0"),
    ({"torch_forward": [3]}, "[operands, seconds]"),
    ({"torch_backward": [[4, 1e-5], [2, 2e-5]]}, "ascending"),
    ({"torch_backward": [[2, -1e-5]]}, "torch_backward seconds"),
    ({"torch_backward": [3]}, "[contractions, seconds]"),
    ({"torch_backward": {}}, "host.torch_backward must be a list"),
    ([], "host must be a JSON object"),
])
def test_bad_host_costs_name_the_culprit(host, culprit):
    with pytest.raises(PlanningError, match="host") as raised:
        profile_from_dict({"bandwidth_bytes_per_s": 1e9, "flops_per_s": 1e9, "host": host},
                          "f.json")
    assert culprit in str(raised.value)


def test_every_nominal_profile_carries_host_figures():
    for profile in NOMINAL.values():
        host = profile.host
        assert host.forward_step_s > 0 and host.backward_step_s > 0
        assert host.torch_node_s > 0 and host.torch_backward_s > 0
        operands = [n for n, _ in host.torch_forward]
        assert operands == sorted(operands) and operands[0] == 2
        # torch.einsum's call of three or more operands searches a path: dearer than two.
        assert interpolate(host.torch_forward, 4) > interpolate(host.torch_forward, 2)


def _phases(steps, profile):
    seconds = step_times(steps, profile, "float32")
    return {phase: sum(t for t, c in zip(seconds, steps, strict=True) if c.phase == phase)
            for phase in ("forward", "backward")}


def _kernels(steps, profile, phase):
    from einsum_analyze.roofline.time_model import kernel_seconds

    return sum(kernel_seconds(c, profile, "float32") for c in steps if c.phase == phase)


def test_on_an_asynchronous_device_a_phase_takes_its_kernels_or_its_host_not_both():
    # The same host costs beside kernels of 1 ms each (bound by the bandwidth): on a
    # synchronous device the phase pays both, on a GPU only its kernels.
    slow = profile_from_dict({"name": "slow", "bandwidth_bytes_per_s": 1e3,
                              "flops_per_s": 1e30, "launch_s": 1e-6}, "slow")
    sync = replace(slow, host=HOST)
    gpu = replace(sync, is_async=True)
    _, steps = _predicted("ab,bc->ac", [(4, 4), (4, 4)], "reverse", sync)
    for phase in ("forward", "backward"):
        kernels = _kernels(steps, gpu, phase)
        assert _phases(steps, gpu)[phase] == pytest.approx(kernels, rel=1e-12)
        assert _phases(steps, sync)[phase] > kernels
    t, _ = _predicted("ab,bc->ac", [(4, 4), (4, 4)], "reverse", gpu)
    assert t.total_s == pytest.approx(sum(_phases(steps, gpu).values()), rel=1e-12)


def test_on_an_asynchronous_device_a_host_bound_phase_pays_the_dispatch_of_its_kernels():
    # Kernels that cost nothing: each phase is its host's, its kernels' dispatch at
    # launch_s each included.
    gpu = replace(HOSTED, launch_s=2e-6, is_async=True)
    t, steps = _predicted("ab,bc->ac", [(4, 4), (4, 4)], "reverse", gpu)
    sync, _ = _predicted("ab,bc->ac", [(4, 4), (4, 4)], "reverse", replace(gpu, is_async=False))
    launches = {phase: sum(c.launches for c in steps if c.phase == phase)
                for phase in ("forward", "backward")}
    kernels = {phase: _kernels(steps, gpu, phase) for phase in ("forward", "backward")}
    assert t.forward_s == pytest.approx(
        sync.forward_s - kernels["forward"] + launches["forward"] * 2e-6, rel=1e-9)
    assert t.backward_s == pytest.approx(
        sync.backward_s - kernels["backward"] + launches["backward"] * 2e-6, rel=1e-9)


def test_gpus_are_asynchronous_and_the_cpu_is_not():
    assert {name: p.is_async for name, p in NOMINAL.items()} == {
        "h200": True, "h100": True, "a100": True, "cpu": False}
    read = profile_from_dict({**NOMINAL["h200"].to_dict("float32")}, "x")
    assert read.is_async is True
    assert profile_from_dict({"bandwidth_bytes_per_s": 1, "flops_per_s": 1}, "x").is_async is False
    with pytest.raises(PlanningError, match="is_async must be true or false"):
        profile_from_dict({"bandwidth_bytes_per_s": 1, "flops_per_s": 1, "is_async": 1}, "x")


def test_on_an_asynchronous_device_our_kernels_pay_their_dispatch_and_torchs_do_not():
    gpu = replace(HOSTED, launch_s=2e-6, is_async=True)
    dearer = replace(gpu, host=replace(HOST, dispatch_s=1e-5))
    for strategy in ("reverse", "torch-autograd"):
        cheap, steps = _predicted("ab,bc->ac", [(4, 4), (4, 4)], strategy, gpu)
        paid, _ = _predicted("ab,bc->ac", [(4, 4), (4, 4)], strategy, dearer)
        launches = sum(c.launches for c in steps)
        extra = launches * 1e-5 if strategy == "reverse" else 0.0
        assert paid.total_s - cheap.total_s == pytest.approx(extra, abs=1e-12)
    # A synchronous device prices its kernels by their classes alone: no dispatch on top.
    sync = replace(dearer, is_async=False)
    assert _predicted("ab,bc->ac", [(4, 4), (4, 4)], "reverse", sync)[0].total_s == \
        pytest.approx(_predicted("ab,bc->ac", [(4, 4), (4, 4)], "reverse",
                                 replace(gpu, is_async=False))[0].total_s)


def test_autograds_backward_call_follows_its_points_where_the_profile_has_them():
    # ab,bc,cd->ad under torch autograd: four gradient contractions in backward. With
    # points, the call costs their figure at 4 (between 2 and 8, log-log), the line of
    # torch_backward_s and torch_node_s left out; without, the line.
    points = ((2.0, 3e-4), (8.0, 6e-4))
    pointed = replace(HOSTED, host=replace(HOST, torch_backward=points))
    t, steps = _predicted("ab,bc,cd->ad", [(4, 4)] * 3, "torch-autograd", pointed)
    contractions = sum(c.phase == "backward" for c in steps)
    assert contractions == 4
    assert t.backward_s == pytest.approx(interpolate(points, 4), rel=1e-9)
    assert t.backward_s == pytest.approx(3e-4 * 2 ** 0.5, rel=1e-9)
    line, _ = _predicted("ab,bc,cd->ad", [(4, 4)] * 3, "torch-autograd")
    assert line.backward_s == pytest.approx(7e-5 + 4 * 2e-5, rel=1e-9)
    # One contraction, below the first point: the first point's figure.
    assert pointed.host.backward_call_s(1) == 3e-4


def test_a_broadcast_products_reductions_are_not_gradient_contractions_of_their_own():
    # i,d->id under torch autograd: one product node (MulBackward) makes both gradients,
    # each a full-size product summed to its operand's shape inside the node. The model
    # has four backward steps; autograd's call is priced at the two products, as a
    # matrix product's (ab,bc->ac: two gradient contractions, no reduction).
    points = ((2.0, 3e-4), (8.0, 6e-4))
    pointed = replace(HOSTED, host=replace(HOST, torch_backward=points))
    outer, steps = _predicted("i,d->id", [(64,), (32,)], "torch-autograd", pointed)
    backward = [c for c in steps if c.phase == "backward"]
    assert len(backward) == 4
    assert [c.equation for c in backward if c.folded] == ["id->i", "id->d"]
    assert gradient_nodes(steps) == 2
    assert outer.backward_s == pytest.approx(3e-4, rel=1e-9)
    pair, pair_steps = _predicted("ab,bc->ac", [(4, 4)] * 2, "torch-autograd", pointed)
    assert gradient_nodes(pair_steps) == 2 and not any(c.folded for c in pair_steps)
    assert pair.backward_s == pytest.approx(outer.backward_s, rel=1e-9)
    # A sum's own backward (the unreduce of ijj->i) is a node of its own: it counts.
    _, diag = _predicted("ijj,k->ik", [(4, 4, 4), (4,)], "torch-autograd", pointed)
    assert [c.kernel for c in diag if c.phase == "backward" and not c.folded] == [
        "einsum", "einsum", "unreduce"]
    # Our executor's steps are never folded: its backward is priced by its own steps.
    _, ours = _predicted("i,d->id", [(64,), (32,)], "reverse", pointed)
    assert not any(c.folded for c in ours)


def test_a_tiny_outer_product_runs_torch_einsum_on_the_nominal_cpu():
    # i,d->id at 64 and 32 on the 2-core cpu, one thread, forward + backward: torch.einsum
    # 129 us, the reverse plan 166 us (docs/results/folded_2026-12-04). With the product
    # node's reductions priced as four gradient contractions the model picked reverse.
    from einsum_analyze.training.choice import NO_BUDGET, _choose_dropin

    for equation, shapes in (("i,d->id", [(64,), (32,)]), ("bi,bj->bij", [(16, 32), (16, 24)])):
        choice = _choose_dropin(equation, shapes, "float32", [0, 1], "auto", "auto", NO_BUDGET,
                                NOMINAL["cpu"])
        assert choice.runs_torch, (equation, choice.reason)


def test_the_hosts_side_of_a_phase_prices_kernels_by_dispatch_on_a_gpu_only():
    # ijj,k->ik in reverse: steps of one and of two kernels.
    slow = profile_from_dict({"name": "slow", "bandwidth_bytes_per_s": 1e3,
                              "flops_per_s": 1e30, "launch_s": 3e-6}, "slow")
    gpu = replace(slow, is_async=True, host=replace(HOST, dispatch_s=1e-6))
    _, steps = _predicted("ijj,k->ik", [(4, 4, 4), (4,)], "reverse", slow)
    assert {c.launches for c in steps} == {1, 2}
    for step in steps:
        assert host_kernel_seconds(step, gpu, "float32") == pytest.approx(
            step.launches * 4e-6, rel=1e-12)
        assert host_kernel_seconds(step, slow, "float32") == \
            kernel_seconds(step, slow, "float32") > 1e-3  # bound by the bandwidth
    _, torch_steps = _predicted("ijj,k->ik", [(4, 4, 4), (4,)], "torch-autograd", slow)
    assert all(host_kernel_seconds(c, gpu, "float32") == c.launches * 3e-6
               for c in torch_steps)  # torch's own dispatch: no dispatch_s of ours
