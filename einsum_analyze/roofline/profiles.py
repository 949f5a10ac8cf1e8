"""Device profiles for the roofline: a memory bandwidth and a FLOP rate per dtype.

A profile comes from one of three places, and says which in ``source``:

- ``"nominal"``: the built-in table below, the vendors' published peak figures (dense,
  no sparsity). No device reaches them; a bound drawn from them is optimistic.
- ``"file"``: a JSON file the user gives (``--roofline FILE.json``).
- ``"calibrated"``: measured on the device in the same run
  (:mod:`einsum_analyze.backends.calibration`): a large copy and a large batched
  matrix product in the report's dtype.

Analysis only: no torch, no allocation.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import PlanningError
from ..model.types import DTYPE_ITEMSIZE
from .host import CPU_HOST, GPU_HOST, HostCosts, host_from_dict

__all__ = ["MAX_NAME", "NOMINAL", "UNKNOWN_GPU", "DeviceProfile", "load_profile",
           "nominal_profile", "profile_from_dict", "profile_names"]

SOURCES = ("nominal", "file", "calibrated")


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceProfile:
    """What a device can do, for the roofline's lower bounds.

    Attributes:
        name: ``"h200"``, a file's ``name``, or the device (``"cuda:0"``, ``"cpu"``).
        source: ``"nominal"``, ``"file"`` or ``"calibrated"``.
        bandwidth_bytes_per_s: Memory bandwidth (bytes read plus written per second).
        flops_per_s: FLOP rate by dtype (the matrix-multiply rate, FLOPs counted as
            opt_einsum counts them: a multiply-add is two).
        description: Where the figures come from.
        launch_s: Seconds each kernel costs besides its work: the host's dispatch of
            one eager torch call, and on a GPU its launch (the time model's per-kernel
            term, :mod:`.time_model`; the bounds leave it out).
        kernel_times: Measured seconds of each kernel class at a few sizes, by class
            (``"bmm"``, ``"skinny"``, ``"mul"``, ``"reduce"``, ``"copy"``): ascending
            ``(work, seconds)`` points, work in FLOPs for ``bmm`` and in bytes moved for
            the others (a calibration's; empty: the time model uses the roofline).
        host: Seconds the host adds to the kernels: our executor's per step and per
            run, torch.einsum's per call and autograd's per node (:mod:`.host`).
        is_async: The device runs kernels while the host goes on (a GPU): a phase takes
            the larger of its kernels' seconds and its host's (:mod:`.time_model`), not
            their sum.
    """

    name: str
    source: str
    bandwidth_bytes_per_s: float
    flops_per_s: Mapping[str, float] = field(default_factory=dict)
    description: str = ""
    launch_s: float = 0.0
    kernel_times: Mapping[str, tuple[tuple[float, float], ...]] = field(default_factory=dict)
    host: HostCosts = field(default_factory=HostCosts)
    is_async: bool = False

    def rate(self, dtype: str) -> float:
        """The FLOP rate for ``dtype``.

        Raises:
            PlanningError: The profile has no rate for ``dtype``.
        """
        found = self.flops_per_s.get(dtype)
        if found is None:
            raise PlanningError(
                f"--roofline {self.name}: no flops_per_s for dtype {dtype} "
                f"(it has {', '.join(sorted(self.flops_per_s)) or 'none'})"
            )
        return found

    def to_dict(self, dtype: str | None = None) -> dict[str, Any]:
        """The profile as JSON data; with ``dtype``, only that dtype's rate."""
        rates = dict(self.flops_per_s)
        if dtype is not None:
            rates = {dtype: self.rate(dtype)}
        return {
            "name": self.name,
            "source": self.source,
            "bandwidth_bytes_per_s": self.bandwidth_bytes_per_s,
            "flops_per_s": rates,
            "description": self.description,
            "launch_s": self.launch_s,
            "host": self.host.to_dict(),
            "is_async": self.is_async,
        }


def _nominal(name: str, bandwidth: float, fp64: float, fp32: float, half: float,
             description: str, launch_s: float, host: HostCosts,
             is_async: bool = True) -> DeviceProfile:
    # Complex products: four real multiply-adds per complex one, at the real rate.
    return DeviceProfile(
        name=name, source="nominal", bandwidth_bytes_per_s=bandwidth,
        flops_per_s={"float64": fp64, "float32": fp32, "float16": half, "bfloat16": half,
                     "complex64": fp32 / 4, "complex128": fp64 / 4},
        description=description, launch_s=launch_s, host=host, is_async=is_async,
    )


GPU_LAUNCH_S = 1e-5
"""Nominal seconds per kernel on a GPU: an eager torch call's host dispatch, which hides
the launch itself (9.8 us on an H200 with torch 2.11, docs/results/gpu_2026-12-02/
timemodel.log; calibrate for the device's own figure)."""

CPU_DISPATCH_S = 4e-6
"""Nominal seconds per kernel on a CPU: an eager torch call's dispatch."""


NOMINAL: Mapping[str, DeviceProfile] = {
    "h200": _nominal("h200", 4.8e12, 67e12, 67e12, 989e12,
                     "NOMINAL: NVIDIA H200 SXM datasheet (HBM3e 4.8 TB/s; FP64 tensor core "
                     "67 TFLOPS; FP32 67 TFLOPS, no TF32; FP16/BF16 tensor core 989 TFLOPS "
                     "dense)", GPU_LAUNCH_S, GPU_HOST),
    "h100": _nominal("h100", 3.35e12, 67e12, 67e12, 989e12,
                     "NOMINAL: NVIDIA H100 SXM datasheet (HBM3 3.35 TB/s; FP64 tensor core "
                     "67 TFLOPS; FP32 67 TFLOPS, no TF32; FP16/BF16 tensor core 989 TFLOPS "
                     "dense)", GPU_LAUNCH_S, GPU_HOST),
    "a100": _nominal("a100", 2.039e12, 19.5e12, 19.5e12, 312e12,
                     "NOMINAL: NVIDIA A100 80GB SXM datasheet (HBM2e 2,039 GB/s; FP64 tensor "
                     "core 19.5 TFLOPS; FP32 19.5 TFLOPS, no TF32; FP16/BF16 tensor core "
                     "312 TFLOPS dense)", GPU_LAUNCH_S, GPU_HOST),
    "cpu": _nominal("cpu", 50e9, 100e9, 200e9, 50e9,
                    "NOMINAL: a generic server CPU core group (50 GB/s; 200 GFLOP/s float32, "
                    "100 GFLOP/s float64; half precision emulated at 50 GFLOP/s); an order "
                    "of magnitude only: calibrate by running on it", CPU_DISPATCH_S, CPU_HOST,
                    is_async=False),
}
"""The built-in table (``--roofline h200|h100|a100|cpu``); docs/roofline.md cites it."""


UNKNOWN_GPU = "h100"
"""The nominal profile of a CUDA device whose name matches no entry of :data:`NOMINAL`
(the middle of the table's GPUs)."""


def nominal_profile(device: str, gpu_name: str | None = None) -> DeviceProfile:
    """The nominal profile of a device: ``cpu``, or a CUDA device by its name.

    ``device`` is a torch device (``cpu``, ``cuda:0``, ``meta``); ``gpu_name`` the CUDA
    device's name (``torch.cuda.get_device_name``: ``"NVIDIA H200"``), matched against
    the table's GPUs; a GPU that matches none is priced as :data:`UNKNOWN_GPU`. Any
    other device is priced as the cpu.

    Example:
        >>> nominal_profile("cuda:1", "NVIDIA H200").name, nominal_profile("cuda").name
        ('h200', 'h100')
        >>> nominal_profile("cpu").name, nominal_profile("meta").name
        ('cpu', 'cpu')
    """
    if not device.startswith("cuda"):
        return NOMINAL["cpu"]
    words = (gpu_name or "").lower().replace("-", " ").split()
    found = next((name for name, profile in NOMINAL.items()
                  if name != "cpu" and name in words), UNKNOWN_GPU)
    return NOMINAL[found]


def profile_names() -> tuple[str, ...]:
    """The built-in profiles' names."""
    return tuple(NOMINAL)


def _positive(value: Any, what: str, origin: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PlanningError(f"--roofline {origin}: {what} must be a number, not {value!r:.40}")
    number = float(value)
    if not math.isfinite(number) or number <= 0:
        raise PlanningError(f"--roofline {origin}: {what} must be positive and finite")
    return number


MAX_NAME = 64
"""The longest ``name`` a profile file may give (it titles the roofline table)."""


def profile_from_dict(data: Any, origin: str) -> DeviceProfile:
    """A profile from JSON data: ``bandwidth_bytes_per_s`` and ``flops_per_s``.

    ``flops_per_s`` is one number (every dtype) or an object by dtype; ``name``,
    ``description``, ``launch_s`` (seconds per kernel, 0 when absent), ``host`` (the
    host's seconds besides the kernels, :func:`.host.host_from_dict`; none when absent)
    and ``is_async`` (kernels run while the host goes on, false when absent) are
    optional: a profile's own JSON (:meth:`DeviceProfile.to_dict`) reads back.

    Raises:
        PlanningError: A field is missing or not a positive number, or a dtype unknown.

    Example:
        >>> p = profile_from_dict({"bandwidth_bytes_per_s": 1e12, "flops_per_s": 5e13}, "x")
        >>> p.rate("float32"), p.source
        (50000000000000.0, 'file')
    """
    if not isinstance(data, dict):
        raise PlanningError(f"--roofline {origin}: expected a JSON object")
    for key in ("bandwidth_bytes_per_s", "flops_per_s"):
        if key not in data:
            raise PlanningError(f"--roofline {origin}: missing field {key!r}")
    bandwidth = _positive(data["bandwidth_bytes_per_s"], "bandwidth_bytes_per_s", origin)
    raw = data["flops_per_s"]
    rates: dict[str, float]
    if isinstance(raw, dict):
        rates = {}
        for dtype, value in raw.items():
            if dtype not in DTYPE_ITEMSIZE:
                raise PlanningError(f"--roofline {origin}: flops_per_s names an unknown "
                                    f"dtype {str(dtype)!r:.40}")
            rates[dtype] = _positive(value, f"flops_per_s.{dtype}", origin)
        if not rates:
            raise PlanningError(f"--roofline {origin}: flops_per_s is empty")
    else:
        rate = _positive(raw, "flops_per_s", origin)
        rates = dict.fromkeys(DTYPE_ITEMSIZE, rate)
    launch_s = 0.0
    if "launch_s" in data:
        launch = data["launch_s"]
        if isinstance(launch, bool) or not isinstance(launch, int | float) \
                or not math.isfinite(launch) or launch < 0:
            raise PlanningError(f"--roofline {origin}: launch_s must be a number of seconds "
                                f"at least 0, not {launch!r:.40}")
        launch_s = float(launch)
    name = data.get("name", origin)
    description = data.get("description", "")
    if not isinstance(name, str) or not isinstance(description, str):
        raise PlanningError(f"--roofline {origin}: name and description must be strings")
    if "name" in data and not (0 < len(name) <= MAX_NAME and name.isprintable()):
        raise PlanningError(f"--roofline {origin}: name must be 1 to {MAX_NAME} printable "
                            f"characters, not {name!r:.40}")
    host = host_from_dict(data["host"], origin) if "host" in data else HostCosts()
    is_async = data.get("is_async", False)
    if not isinstance(is_async, bool):
        raise PlanningError(f"--roofline {origin}: is_async must be true or false, not "
                            f"{is_async!r:.40}")
    return DeviceProfile(name=name, source="file", bandwidth_bytes_per_s=bandwidth,
                         flops_per_s=rates, description=description, launch_s=launch_s,
                         host=host, is_async=is_async)


def load_profile(text: str) -> DeviceProfile:
    """``--roofline NAME|FILE.json``: a built-in profile by name, or a JSON file.

    Raises:
        PlanningError: An unknown name, an unreadable file, or a malformed profile.
    """
    key = text.strip().lower()
    if key in NOMINAL:
        return NOMINAL[key]
    if not key.endswith(".json"):
        raise PlanningError(f"--roofline {text!r:.60}: not a built-in profile "
                            f"({', '.join(NOMINAL)}) nor a .json file")
    try:
        with open(text, encoding="utf-8") as stream:
            data = json.load(stream)
    except OSError as err:
        raise PlanningError(f"--roofline: cannot read {text!r:.60}: {err.strerror}") from err
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
        raise PlanningError(f"--roofline: {text!r:.60} is not JSON text") from err
    except ValueError as err:  # e.g. an integer too long to convert
        raise PlanningError(f"--roofline: {text!r:.60} is not readable JSON") from err
    return profile_from_dict(data, text)
