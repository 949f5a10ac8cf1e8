"""The device calibration gives finite, plausible figures on the cpu, quickly, once."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from einsum_analyze.backends.calibration import calibrate, clear_cache  # noqa: E402


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_cpu_calibration_is_finite_plausible_and_cached(dtype):
    clear_cache()
    found = calibrate("cpu", dtype)
    assert math.isfinite(found.bandwidth_bytes_per_s) and math.isfinite(found.flops_per_s)
    # Any cpu this runs on copies between 100 MB/s and 10 TB/s, and multiplies between
    # 10 MFLOP/s and 100 TFLOP/s.
    assert 1e8 < found.bandwidth_bytes_per_s < 1e13
    assert 1e7 < found.flops_per_s < 1e14
    assert found.seconds > 0  # how long it took is the benchmarks' to judge, not a test's
    assert calibrate("cpu", dtype) is found  # cached for the process
    profile = found.profile()
    assert profile.source == "calibrated" and profile.rate(dtype) == found.flops_per_s
    entry = found.to_dict()
    assert entry["device"] == "cpu" and entry["dtype"] == dtype and entry["tf32"] is False


def test_cpu_calibration_measures_a_cost_per_kernel():
    from einsum_analyze.backends.calibration import calibrate

    found = calibrate("cpu", "float32")
    # A one-element addition takes above 100 ns and below 1 ms of dispatch on any host.
    assert 1e-7 < found.launch_s < 1e-3
    assert found.profile().launch_s == found.launch_s
    assert found.to_dict()["launch_s"] == found.launch_s


def test_cpu_calibration_times_every_kernel_class_at_growing_sizes(monkeypatch):
    from einsum_analyze.backends import calibration
    from einsum_analyze.roofline.time_model import KERNEL_CLASSES

    # One torch thread, in a calibration of its own: on a loaded 2-core machine a pool of
    # two threads waits for a descheduled one in every parallel region, and the smallest
    # outer product (16 batches of 2 by 640) took 8 to 12 ms with two threads, against 9
    # us with one, whatever its size (2026-12-04, load average 4.5).
    monkeypatch.setattr(calibration, "_CACHE", {})
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        found = calibrate("cpu", "float32")
    finally:
        torch.set_num_threads(threads)
    assert set(found.kernel_times) == set(KERNEL_CLASSES)
    for name, points in found.kernel_times.items():
        works = [work for work, _ in points]
        seconds = [s for _, s in points]
        assert len(points) >= 4 and works == sorted(works), name
        assert seconds == sorted(seconds), name  # more work never takes less
        # The smallest size costs a dispatch (above 100 ns); the largest more than 10x it.
        assert 1e-7 < seconds[0] < 1e-3 and seconds[-1] > 10 * seconds[0], name
    assert found.profile().kernel_times == found.kernel_times
    assert found.to_dict()["clock"] in ("cpu", "wall")


def test_cpu_calibration_measures_the_hosts_costs_and_keeps_them_in_the_profile():
    import json

    from einsum_analyze.backends.host_calibration import TORCH_CHAINS
    from einsum_analyze.roofline import profile_from_dict

    found = calibrate("cpu", "float32")
    host = found.host
    seconds = (host.forward_step_s, host.backward_step_s, host.forward_run_s,
               host.backward_run_s, host.forward_kind_s, host.backward_kind_s,
               host.forward_label_s, host.backward_label_s, host.torch_node_s,
               host.torch_backward_s)
    # Seconds beyond the kernels: finite and never below 0 (no figure of time is asserted).
    assert all(math.isfinite(s) and s >= 0 for s in seconds), host
    assert [n for n, _ in host.torch_forward] == [float(n) for n in TORCH_CHAINS]
    assert all(math.isfinite(s) and s > 0 for _, s in host.torch_forward)
    # The backward call at each chain's gradient contractions (two a pairwise step),
    # none above a later one's.
    assert [n for n, _ in host.torch_backward] == [2.0 * (n - 1) for n in TORCH_CHAINS]
    backward = [s for _, s in host.torch_backward]
    assert all(math.isfinite(s) and s > 0 for s in backward)
    assert backward == sorted(backward)
    profile = found.profile()
    assert profile.host == host
    assert found.to_dict()["host"] == host.to_dict()
    saved = json.loads(json.dumps(profile.to_dict("float32")))
    assert profile_from_dict(saved, "saved.json").host == host


def test_the_host_chains_are_the_equations_torch_einsum_runs():
    from einsum_analyze.backends.host_calibration import chain

    equation, terms, events, sizes = chain(4)
    assert equation == "ab,bc,cd,de->ae" and terms == ["ab", "bc", "cd", "de"]
    steps = [e for e in events if e.kind == "alloc"]
    assert [e.equation for e in steps] == ["ab,bc->ac", "ac,cd->ad", "ad,de->ae"]
    # Each step's result is freed by the step after it, as a schedule frees it.
    assert [e.tensor for e in events if e.kind == "free"] == [s.tensor for s in steps[:-1]]
    assert set(sizes.values()) == {2}


def test_the_mixed_schedule_has_one_step_of_each_kind_as_lowered():
    from einsum_analyze.backends.host_calibration import MIXED_KINDS, mixed
    from einsum_analyze.model.lowering import lower_events
    from einsum_analyze.roofline import step_costs

    terms, events, sizes = mixed()
    steps = step_costs(lower_events(events, terms, sizes, cache={}), sizes, 4)
    assert len(steps) == MIXED_KINDS == len({step.kernel for step in steps})
