"""The drop-in's choice predicts seconds on the profile of the operands' device.

The process's calibration of that device and dtype where there is one, else the nominal
profile of the device's kind (a CUDA device by its name). There is no CUDA here: CUDA
calls are given as device text, and a GPU's name or calibration is put in by hand.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from einsum_analyze import analyze
from einsum_analyze.backends import calibration
from einsum_analyze.backends.calibration import Calibration, device_profile
from einsum_analyze.roofline import NOMINAL, HostCosts
from einsum_analyze.roofline.profiles import UNKNOWN_GPU, nominal_profile
from einsum_analyze.training import plans
from einsum_analyze.training.choice import NO_BUDGET, choose_dropin, predicted_s

SCORES = ("bhqd,bhkd->bhqk", [(8, 8, 512, 64), (8, 8, 512, 64)])
"""Attention scores: 2.1 GFLOP forward, about 11 ms at the nominal cpu's rate, far more
than on any GPU (analysis only: nothing is allocated)."""


@pytest.fixture(autouse=True)
def _no_calibrations() -> Iterator[None]:
    calibration.clear_cache()
    yield
    calibration.clear_cache()


def _gpu_named(monkeypatch: pytest.MonkeyPatch, name: str | None) -> None:
    monkeypatch.setattr(calibration, "_gpu_name", lambda device: name)


def _calibrated(device: str, dtype: str, launch_s: float) -> Calibration:
    """A calibration as a run leaves it in the process's cache (figures made up)."""
    made = Calibration(device=device, dtype=dtype, bandwidth_bytes_per_s=1e12,
                       flops_per_s=1e13, copy_bytes=2**20, bmm_shape=(1, 64, 64, 64),
                       tf32=False, seconds=1.0, launch_s=launch_s,
                       host=HostCosts(forward_step_s=2e-6, backward_run_s=3e-5))
    calibration._CACHE[(device, dtype, 1)] = made
    return made


@pytest.mark.parametrize(("name", "expected"), [
    ("NVIDIA H200", "h200"), ("NVIDIA H100 80GB HBM3", "h100"),
    ("NVIDIA A100-SXM4-80GB", "a100"), ("NVIDIA GeForce RTX 4090", UNKNOWN_GPU),
    (None, UNKNOWN_GPU)])
def test_a_cuda_device_gets_the_nominal_profile_its_name_says(name: str | None,
                                                              expected: str) -> None:
    assert nominal_profile("cuda:3", name) is NOMINAL[expected]


def test_a_device_that_is_not_cuda_gets_the_cpu_profile() -> None:
    assert nominal_profile("cpu") is NOMINAL["cpu"]
    assert nominal_profile("meta", "NVIDIA H200") is NOMINAL["cpu"]


def test_a_cuda_call_is_predicted_on_its_gpus_nominal_profile(
        monkeypatch: pytest.MonkeyPatch) -> None:
    _gpu_named(monkeypatch, "NVIDIA H200")
    equation, shapes = SCORES
    choice = choose_dropin(equation, shapes, "float32", (0, 1), "auto", "auto", NO_BUDGET,
                           "cuda:0")
    assert choice.profile is NOMINAL["h200"]
    assert "seconds on h200, nominal" in choice.reason
    sizes = analyze(equation, shapes).equation.size_dict
    on_gpu = predicted_s(choice.result, sizes, "float32", NOMINAL["h200"])
    on_cpu = predicted_s(choice.result, sizes, "float32", NOMINAL["cpu"])
    assert on_gpu < on_cpu / 10
    from einsum_analyze.model.units import format_seconds

    assert format_seconds(on_gpu) in choice.reason
    assert format_seconds(on_cpu) not in choice.reason


def test_a_cuda_call_uses_the_processs_calibration_of_that_device(
        monkeypatch: pytest.MonkeyPatch) -> None:
    _gpu_named(monkeypatch, "NVIDIA H200")
    made = _calibrated("cuda:1", "float32", launch_s=7e-6)
    equation, shapes = SCORES
    choice = choose_dropin(equation, shapes, "float32", (0, 1), "auto", "auto", NO_BUDGET,
                           "cuda:1")
    assert choice.profile == made.profile() and choice.profile.source == "calibrated"
    assert "seconds on cuda:1, calibrated" in choice.reason
    # Another device, or another dtype, has no calibration: nominal there.
    assert device_profile("cuda:0", "float32") is NOMINAL["h200"]
    assert device_profile("cuda:1", "float64") is NOMINAL["h200"]


def test_cuda_alone_means_the_first_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    _gpu_named(monkeypatch, None)
    made = _calibrated("cuda:0", "float32", launch_s=7e-6)
    assert device_profile("cuda", "float32") == made.profile()


def test_a_cpu_call_uses_the_cpus_calibration_once_there_is_one() -> None:
    equation, shapes = SCORES
    before = choose_dropin(equation, shapes, "float32", (0, 1), "auto", "auto", NO_BUDGET)
    assert before.profile is NOMINAL["cpu"] and "seconds on cpu, nominal" in before.reason
    made = _calibrated("cpu", "float32", launch_s=3e-6)
    after = choose_dropin(equation, shapes, "float32", (0, 1), "auto", "auto", NO_BUDGET,
                          "cpu")
    assert after.profile == made.profile() and "seconds on cpu, calibrated" in after.reason


def test_the_plan_cache_hands_the_calls_device_to_the_choice(
        monkeypatch: pytest.MonkeyPatch) -> None:
    _gpu_named(monkeypatch, "NVIDIA A100-SXM4-80GB")
    plans.clear_cache()
    equation, shapes = SCORES
    sizes = tuple(tuple(s) for s in shapes)
    for device in ("cuda:0", "cpu"):
        plans.get_plan(equation, sizes, "float32", device, (True, True), "auto", "auto",
                       NO_BUDGET)
    reasons = {c.device: c.reason for c in plans.cache_info().choices
               if c.equation == equation}
    assert "seconds on a100, nominal" in reasons["cuda:0"]
    assert "seconds on cpu, nominal" in reasons["cpu"]
    plans.clear_cache()
