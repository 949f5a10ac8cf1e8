"""A CUDA call's choice predicts seconds on a CUDA profile, never the cpu's.

Without a calibration in the process it is the nominal profile the GPU's name says (an
H200's on an H200); after a calibration of the device, that calibration. Skipped without
CUDA (tests/conftest.py skips every test marked gpu).
"""

from __future__ import annotations

import pytest

EQUATION = "bhqd,bhkd->bhqk"


def _choice_reason(shape: tuple[int, ...]) -> str:
    """The drop-in's reason for a first call of attention scores on ``shape`` on CUDA."""
    import torch

    import einsum_analyze.torch as dropin

    q = torch.randn(shape, device="cuda", requires_grad=True)
    k = torch.randn(shape, device="cuda", requires_grad=True)
    y = dropin.einsum(EQUATION, q, k)
    torch.autograd.grad(y, (q, k), torch.ones_like(y))
    (choice,) = [c for c in dropin.cache_info().choices
                 if c.equation == EQUATION and c.shapes == (shape, shape)]
    assert choice.device == "cuda:0"
    return choice.reason


@pytest.mark.gpu
def test_a_cuda_calls_choice_predicts_seconds_on_a_cuda_profile() -> None:
    import torch

    import einsum_analyze.torch as dropin
    from einsum_analyze.backends.calibration import calibrate, clear_cache
    from einsum_analyze.roofline import NOMINAL
    from einsum_analyze.roofline.profiles import nominal_profile

    clear_cache()
    dropin.clear_cache()
    nominal = nominal_profile("cuda:0", torch.cuda.get_device_name(0))
    assert nominal is not NOMINAL["cpu"]
    if "H200" in torch.cuda.get_device_name(0):
        assert nominal is NOMINAL["h200"]
    reason = _choice_reason((2, 4, 256, 32))
    assert f"seconds on {nominal.name}, nominal" in reason, reason
    calibrate("cuda:0", "float32")
    reason = _choice_reason((2, 4, 128, 32))
    assert "seconds on cuda:0, calibrated" in reason, reason
    clear_cache()
    dropin.clear_cache()
