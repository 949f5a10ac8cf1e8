"""What the benchmark scripts share: scaled shapes and the environment they record."""

from __future__ import annotations

import platform
import time
from collections.abc import Callable

CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter,
                                          "cpu": time.process_time}
"""``--clock`` of the drop-in and model benchmarks: wall time, or the process's CPU time
(all its threads), which on a shared CPU leaves out the time other processes hold the
cores."""


def scaled(shapes: list[list[int]], factor: int) -> list[list[int]]:
    """Divide every dimension of 64 or more by ``factor`` (same sizes stay equal)."""
    return [[max(1, d // factor) if d >= 64 else d for d in shape] for shape in shapes]


def environment(device: str) -> dict[str, object]:
    """Versions, threads and the GPU a benchmark ran with."""
    import numpy
    import opt_einsum
    import torch

    info: dict[str, object] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": torch.__version__,
        "opt_einsum": opt_einsum.__version__,
        "numpy": numpy.__version__,
        "torch_threads": torch.get_num_threads(),
        "device": device,
    }
    if device.startswith("cuda"):
        info["gpu"] = torch.cuda.get_device_name(0)
        info["cuda"] = torch.version.cuda
    return info
