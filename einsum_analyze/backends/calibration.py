"""Calibrate a device for the roofline and the time model: bandwidth, rate, cost per kernel.

Three measurements, in the run that uses them, on the device that runs:

- bandwidth: a large device-to-device copy, bytes read plus bytes written over the time;
- FLOP rate: a large batched matrix product (``torch.bmm``) in the report's dtype,
  ``2 * b * m * k * n`` FLOPs (opt_einsum's convention) over the time;
- cost per kernel: a block of :data:`LAUNCH_CALLS` one-element additions (each allocates
  its output, as a step does), fenced at its
  ends only, over the calls (the host's dispatch of an eager call, which on a GPU also
  paces the launches); the median of :data:`LAUNCH_BLOCKS` blocks.

The best of a few timed calls after a warm-up counts (the rate the device can reach).
Sizes follow the device: on CUDA a 256 MiB copy and a 4 x 4096^3 product (shrunk when
memory is short); on cpu a 64 MiB copy and a 256^3 product, so the whole calibration
stays well under a second. Results are cached per device and dtype for the process.

torch is imported inside the functions: importing this module costs nothing.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..roofline.profiles import DeviceProfile

__all__ = ["LAUNCH_BLOCKS", "LAUNCH_CALLS", "Calibration", "calibrate", "clear_cache"]

LAUNCH_CALLS = 200
"""Tiny kernels per block of the cost-per-kernel measurement."""

LAUNCH_BLOCKS = 7
"""Blocks of that measurement (the median counts: dispatch is what a call pays)."""

_CACHE: dict[tuple[str, str], Calibration] = {}


@dataclass(frozen=True, slots=True, kw_only=True)
class Calibration:
    """What one device reached in the calibration.

    Attributes:
        device: ``cpu``, ``cuda:0``, ...
        dtype: The product's dtype.
        bandwidth_bytes_per_s: Bytes read plus written per second by a large copy.
        flops_per_s: FLOPs per second of a large ``bmm`` in ``dtype``.
        copy_bytes: Bytes of the copied tensor.
        bmm_shape: ``(batch, m, k, n)`` of the product.
        tf32: Whether torch allowed TF32 for float32 products (CUDA) at the time.
        seconds: Wall seconds the calibration took.
        launch_s: Seconds per tiny kernel (dispatch and launch).
    """

    device: str
    dtype: str
    bandwidth_bytes_per_s: float
    flops_per_s: float
    copy_bytes: int
    bmm_shape: tuple[int, int, int, int]
    tf32: bool
    seconds: float
    launch_s: float = 0.0

    def profile(self) -> DeviceProfile:
        """The roofline profile these figures make (source ``"calibrated"``)."""
        return DeviceProfile(
            name=self.device, source="calibrated",
            bandwidth_bytes_per_s=self.bandwidth_bytes_per_s,
            flops_per_s={self.dtype: self.flops_per_s},
            description=(f"calibrated on {self.device}: copy of {self.copy_bytes} B, bmm "
                         f"{'x'.join(map(str, self.bmm_shape))} in {self.dtype}"
                         + (" with TF32" if self.tf32 else "")
                         + f", {self.launch_s * 1e6:.3g} us per kernel"),
            launch_s=self.launch_s,
        )

    def to_dict(self) -> dict[str, Any]:
        """One entry of the report's ``environment.calibration``."""
        return {
            "device": self.device,
            "dtype": self.dtype,
            "bandwidth_bytes_per_s": self.bandwidth_bytes_per_s,
            "flops_per_s": self.flops_per_s,
            "copy_bytes": self.copy_bytes,
            "bmm_shape": list(self.bmm_shape),
            "tf32": self.tf32,
            "seconds": self.seconds,
            "launch_s": self.launch_s,
        }


def clear_cache() -> None:
    """Forget every calibration (tests)."""
    _CACHE.clear()


def _best(call: Callable[[], Any], fence: Callable[[], None], repeats: int) -> float:
    call()
    fence()
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        fence()
        best = min(best, time.perf_counter() - start)
    return max(best, 1e-9)


def _per_kernel(call: Callable[[], Any], fence: Callable[[], None]) -> float:
    """Median seconds per call over blocks of :data:`LAUNCH_CALLS` calls."""
    for _ in range(LAUNCH_CALLS // 4):
        call()
    fence()
    blocks = []
    for _ in range(LAUNCH_BLOCKS):
        start = time.perf_counter()
        for _ in range(LAUNCH_CALLS):
            call()
        fence()
        blocks.append((time.perf_counter() - start) / LAUNCH_CALLS)
    return max(sorted(blocks)[len(blocks) // 2], 1e-9)


def calibrate(device: str, dtype: str) -> Calibration:
    """Measure ``device``'s copy bandwidth and ``dtype`` product rate (cached).

    Args:
        device: ``cpu`` or ``cuda:N``.
        dtype: A torch dtype name (``float32``, ``complex64``, ...).
    """
    key = (device, dtype)
    found = _CACHE.get(key)
    if found is not None:
        return found
    import torch

    start = time.perf_counter()
    torch_dtype = getattr(torch, dtype)
    itemsize = torch.empty((), dtype=torch_dtype).element_size()
    is_cuda = device.startswith("cuda")
    if is_cuda:
        index = torch.device(device).index or 0

        def fence() -> None:
            torch.cuda.synchronize(index)

        free, _ = torch.cuda.mem_get_info(index)
        copy_bytes = min(256 * 2**20, free // 8)
        side = 4096 if free > 64 * 4096 * 4096 * itemsize else 1024
        batch, repeats = 4, 5
        tf32 = torch.get_float32_matmul_precision() != "highest"
    else:
        def fence() -> None:
            return None

        copy_bytes, side, batch, repeats, tf32 = 64 * 2**20, 256, 1, 3, False
    elements = max(1, copy_bytes // itemsize)
    source = torch.ones(elements, dtype=torch_dtype, device=device)
    copy_s = _best(functools.partial(torch.empty_like(source).copy_, source), fence, repeats)
    del source
    square = (batch, side, side)
    operands = [torch.ones(square, dtype=torch_dtype, device=device) for _ in range(3)]
    bmm_s = _best(functools.partial(torch.bmm, operands[0], operands[1], out=operands[2]),
                  fence, repeats)
    del operands
    tiny = [torch.ones(1, dtype=torch_dtype, device=device) for _ in range(2)]
    launch_s = _per_kernel(functools.partial(torch.add, tiny[0], tiny[1]), fence)
    del tiny
    found = Calibration(
        device=device, dtype=dtype,
        bandwidth_bytes_per_s=2 * elements * itemsize / copy_s,
        flops_per_s=2 * batch * side**3 / bmm_s,
        copy_bytes=elements * itemsize, bmm_shape=(batch, side, side, side), tf32=tf32,
        seconds=time.perf_counter() - start, launch_s=launch_s,
    )
    _CACHE[key] = found
    return found
