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
memory is short); on cpu a 64 MiB copy and a 256^3 product.

Last, the host's costs around the kernels (our executor's per step and per run,
torch.einsum's per call and autograd's per node), timed on chains of tiny matrices
beyond what the kernel classes price (:mod:`.host_calibration`).

For the time model (:mod:`einsum_analyze.roofline.time_model`), each kernel class is
timed at a few sizes, from a few elements to tens of MiB, each call allocating its
output as a step does (:func:`kernel_times`): a square ``bmm`` (work: FLOPs), a skinny
``bmm`` whose contracted size is 2, a batched matrix-vector ``bmm`` summing 2 elements
(``matvec``), a batched outer product ``bmm`` of 2-vectors by ``n``-vectors in torch.einsum's
own layout (``outer``), a broadcast ``mul``, a ``sum`` over the last
dimension and a transposing copy (work: bytes read plus written). A point is the best
of :data:`BLOCKS` blocks of calls, each block long enough to time (per call).

On cpu with one torch thread, the clock is the process's CPU time
(:func:`time.process_time`), as the benchmarks use there: on a shared machine it leaves
out the time other processes hold the core. Otherwise it is the wall clock. The whole
calibration stays near a second on cpu. Results are cached per device and dtype for the
process.

torch is imported inside the functions: importing this module costs nothing.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ..roofline.host import HostCosts
from ..roofline.profiles import DeviceProfile, nominal_profile
from .timing import paused_collection

__all__ = ["BLOCKS", "LAUNCH_BLOCKS", "LAUNCH_CALLS", "OUTER_LARGE", "OUTER_SHAPES",
           "Calibration", "calibrate", "calibrated_profile", "clear_cache", "device_profile",
           "kernel_times"]

BLOCKS = 3
"""Timed blocks per size of a kernel class (the best counts)."""

LAUNCH_CALLS = 200
"""Tiny kernels per block of the cost-per-kernel measurement."""

LAUNCH_BLOCKS = 7
"""Blocks of that measurement (the median counts: dispatch is what a call pays)."""

OUTER_SHAPES = ((16, 640), (128, 640), (1024, 640), (4096, 10), (4096, 160))
"""``(batch, n)`` of the ``outer`` class's products on every device."""

OUTER_LARGE = ((8192, 640), (65536, 10), (65536, 40), (65536, 160), (65536, 640))
"""Those added on a GPU: 20 to 1,280 outputs per batch, to 336 MB in float32."""

_CACHE: dict[tuple[str, str, int], Calibration] = {}


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
        kernel_times: Each kernel class's ``(work, seconds)`` points (:func:`kernel_times`).
        clock: ``"cpu"`` (the process's CPU time) or ``"wall"``.
        host: The host's costs around the kernels (:mod:`.host_calibration`).
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
    kernel_times: dict[str, tuple[tuple[float, float], ...]] = field(default_factory=dict)
    clock: str = "wall"
    host: HostCosts = field(default_factory=HostCosts)

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
            launch_s=self.launch_s, kernel_times=self.kernel_times, host=self.host,
            is_async=self.device.startswith("cuda"),
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
            "kernel_times": {name: [list(p) for p in points]
                             for name, points in self.kernel_times.items()},
            "clock": self.clock,
            "host": self.host.to_dict(),
        }


def clear_cache() -> None:
    """Forget every calibration and the GPUs' names (tests)."""
    _CACHE.clear()
    _gpu_name.cache_clear()


def calibrated_profile(device: str, dtype: str) -> DeviceProfile | None:
    """The profile of this process's latest calibration of ``device`` in ``dtype``.

    A calibration is made by a run (:func:`einsum_analyze.execute`, the CLI's
    ``--device``) or by calling :func:`calibrate`; None when there was none. Measures
    nothing.
    """
    found = [c for (name, kind, _), c in _CACHE.items() if name == device and kind == dtype]
    return found[-1].profile() if found else None


def device_profile(device: str, dtype: str) -> DeviceProfile:
    """The profile seconds are predicted on for tensors on ``device`` in ``dtype``.

    The process's calibration of that device and dtype where there is one
    (:func:`calibrated_profile`), else the nominal profile of the device's kind
    (:func:`~einsum_analyze.roofline.profiles.nominal_profile`; a CUDA device by its
    name). Measures nothing.

    Args:
        device: A torch device as text (``cpu``, ``cuda:0``, ``cuda``).
        dtype: A torch dtype name.
    """
    device = "cuda:0" if device == "cuda" else device
    found = calibrated_profile(device, dtype)
    if found is not None:
        return found
    return nominal_profile(device, _gpu_name(device) if device.startswith("cuda") else None)


@functools.cache
def _gpu_name(device: str) -> str | None:
    """The CUDA device's name, None where torch cannot say (no CUDA here)."""
    import torch

    try:
        return str(torch.cuda.get_device_name(torch.device(device)))
    except (RuntimeError, AssertionError, ValueError):
        return None


Clock = Callable[[], float]


def _best(call: Callable[[], Any], fence: Callable[[], None], repeats: int,
          clock: Clock = time.perf_counter) -> float:
    call()
    fence()
    best = math.inf
    for _ in range(repeats):
        start = clock()
        call()
        fence()
        best = min(best, clock() - start)
    return max(best, 1e-9)


def _per_kernel(call: Callable[[], Any], fence: Callable[[], None],
                clock: Clock = time.perf_counter) -> float:
    """Median seconds per call over blocks of :data:`LAUNCH_CALLS` calls."""
    for _ in range(LAUNCH_CALLS // 4):
        call()
    fence()
    blocks = []
    for _ in range(LAUNCH_BLOCKS):
        with paused_collection():
            start = clock()
            for _ in range(LAUNCH_CALLS):
                call()
            fence()
            blocks.append((clock() - start) / LAUNCH_CALLS)
    return max(sorted(blocks)[len(blocks) // 2], 1e-9)


def _per_call(call: Callable[[], Any], fence: Callable[[], None], clock: Clock,
              block_s: float) -> float:
    """Best seconds per call over :data:`BLOCKS` blocks of at least ``block_s`` each."""
    call()
    fence()
    def block(calls: int) -> float:
        with paused_collection():
            start = clock()
            for _ in range(calls):
                call()
            fence()
            return clock() - start

    calls = 1
    while True:  # grow the block until it is long enough to time
        elapsed = block(calls)
        if elapsed >= block_s or calls >= 4096:
            break
        calls *= 4
    best = elapsed / calls
    for _ in range(BLOCKS - 1):
        best = min(best, block(calls) / calls)
    return max(best, 1e-9)


def kernel_times(device: str, dtype: str, fence: Callable[[], None], clock: Clock,
                 large: bool) -> dict[str, tuple[tuple[float, float], ...]]:
    """Each kernel class's measured ``(work, seconds)`` points on ``device`` (see the module).

    Args:
        device: ``cpu`` or ``cuda:N``.
        dtype: A torch dtype name.
        fence: Waits for the device.
        clock: Seconds since an arbitrary origin.
        large: Add the sizes of a GPU (square products to 4096, outputs to 256 MiB in
            float32).
    """
    import torch

    torch_dtype = getattr(torch, dtype)
    itemsize = torch.empty((), dtype=torch_dtype).element_size()

    def ones(*shape: int) -> Any:
        return torch.ones(shape, dtype=torch_dtype, device=device)

    block_s = 2e-3
    sides = (4, 16, 64, 256, 512) + ((1024, 2048, 4096) if large else ())
    thin = (16, 128, 1024, 2048) + ((4096, 8192) if large else ())
    rows = (16, 1024, 65536, 2**19) + ((2**21, 2**22) if large else ())
    found: dict[str, list[tuple[float, float]]] = {k: [] for k in
                                                    ("bmm", "skinny", "matvec", "outer",
                                                     "mul", "reduce", "copy")}
    for side in sides:
        a, b = ones(1, side, side), ones(1, side, side)
        found["bmm"].append((2.0 * side**3, _per_call(
            functools.partial(torch.bmm, a, b), fence, clock, block_s)))
    for m in thin:
        a, b = ones(1, m, 2), ones(1, 2, m)
        found["skinny"].append(((4 * m + m * m) * itemsize, _per_call(
            functools.partial(torch.bmm, a, b), fence, clock, block_s)))
    for n in rows:
        # n/256 products of a 256 x 2 matrix, stored as its two columns, by a 2-vector
        batch = max(1, n // 256)
        columns, vector = ones(batch, 2, 256).transpose(1, 2), ones(batch, 2, 1)
        found["matvec"].append((770 * batch * itemsize, _per_call(
            functools.partial(torch.bmm, columns, vector), fence, clock, block_s)))
        column, row = ones(n, 1), ones(1, 16)
        found["mul"].append(((17 * n + 16) * itemsize, _per_call(
            functools.partial(torch.mul, column, row), fence, clock, block_s)))
        wide = ones(n, 16)
        found["reduce"].append((17 * n * itemsize, _per_call(
            functools.partial(torch.sum, wide, -1), fence, clock, block_s)))
        tall = ones(8, n).t()
        found["copy"].append((16 * n * itemsize, _per_call(
            tall.contiguous, fence, clock, block_s)))
    for batch, n in OUTER_SHAPES + (OUTER_LARGE if large else ()):
        # batch outer products of a 2-vector by an n-vector, laid out as torch.einsum's
        # backward passes them to bmm (its size-1 dim strided as a column: cuBLAS's
        # transposed case, about half the rate of the contiguous one on the H200)
        pairs = ones(batch, 2).as_strided((batch, 2, 1), (2, 1, 2))
        rows_n = ones(batch, 1, n)
        found["outer"].append((itemsize * batch * (2 + n + 2 * n), _per_call(
            functools.partial(torch.bmm, pairs, rows_n), fence, clock, block_s)))
    del a, b, columns, vector, column, row, wide, tall, pairs, rows_n
    return {name: tuple(_ascending(points)) for name, points in found.items()}


def _ascending(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The points with seconds made non-decreasing in work (more work never takes less)."""
    out: list[tuple[float, float]] = []
    for work, seconds in sorted(points):
        out.append((work, max(seconds, out[-1][1]) if out else seconds))
    return out


def calibrate(device: str, dtype: str) -> Calibration:
    """Measure ``device``'s copy bandwidth, ``dtype`` product rate and kernel classes.

    Cached per device, dtype and torch's thread count.

    Args:
        device: ``cpu`` or ``cuda:N``.
        dtype: A torch dtype name (``float32``, ``complex64``, ...).
    """
    import torch

    from .host_calibration import host_costs

    key = (device, dtype, torch.get_num_threads())
    found = _CACHE.get(key)
    if found is not None:
        return found

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
        clock, clock_name = time.perf_counter, "wall"
    else:
        def fence() -> None:
            return None

        copy_bytes, side, batch, repeats, tf32 = 64 * 2**20, 256, 1, 3, False
        one = torch.get_num_threads() == 1
        clock, clock_name = ((time.process_time, "cpu") if one
                             else (time.perf_counter, "wall"))
    elements = max(1, copy_bytes // itemsize)
    source = torch.ones(elements, dtype=torch_dtype, device=device)
    copy_s = _best(functools.partial(torch.empty_like(source).copy_, source), fence, repeats,
                   clock)
    del source
    square = (batch, side, side)
    operands = [torch.ones(square, dtype=torch_dtype, device=device) for _ in range(3)]
    bmm_s = _best(functools.partial(torch.bmm, operands[0], operands[1], out=operands[2]),
                  fence, repeats, clock)
    del operands
    tiny = [torch.ones(1, dtype=torch_dtype, device=device) for _ in range(2)]
    launch_s = _per_kernel(functools.partial(torch.add, tiny[0], tiny[1]), fence, clock)
    del tiny
    times = kernel_times(device, dtype, fence, clock, large=is_cuda)
    kernels = Calibration(
        device=device, dtype=dtype,
        bandwidth_bytes_per_s=2 * elements * itemsize / copy_s,
        flops_per_s=2 * batch * side**3 / bmm_s,
        copy_bytes=elements * itemsize, bmm_shape=(batch, side, side, side), tf32=tf32,
        seconds=0.0, launch_s=launch_s, kernel_times=times, clock=clock_name,
    )
    # The host's costs beyond the kernels as these figures price them.
    host = host_costs(device, dtype, fence, clock, kernels.profile())
    found = replace(kernels, host=host, seconds=time.perf_counter() - start)
    _CACHE[key] = found
    return found
