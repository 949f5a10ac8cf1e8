"""What a backward call of torch autograd costs after each kind of block (a diagnosis).

torch.einsum's backward call on ``ba,ac`` (16 x 8, 8 x 4) and on the host calibration's
two-matrix chain (2 x 2), timed one call a block with its forward done before the clock,
after: nothing (warm), a 20 ms block of the same forward (as the benchmark's rounds run
it), a 10 ms block of our executor's forward (as the host calibration runs it), and a
20 ms sleep. Medians of 30 calls, microseconds. Usage: python3 torch_backward_diag.py cuda
"""

# ruff: noqa: T201

from __future__ import annotations

import statistics
import sys
import time

import torch

from einsum_analyze.backends.host_calibration import _executor_run, chain

device = sys.argv[1] if len(sys.argv) > 1 else "cpu"


def fence() -> None:
    """Wait for the device."""
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def case(equation: str, shapes: list[tuple[int, ...]]) -> dict[str, float]:
    """Median microseconds of the backward call after each kind of block."""
    operands = [torch.ones(s, device=device) for s in shapes]

    def forward() -> tuple[torch.Tensor, list[torch.Tensor]]:
        with torch.enable_grad():
            leaves = [t.detach().requires_grad_(True) for t in operands]
            return torch.einsum(equation, *leaves), leaves

    y, _ = forward()
    upstream = torch.ones_like(y)
    run, _, _ = _executor_run(device, torch.float32, *chain(9)[1:])

    def block(call, seconds: float) -> None:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            call()
        fence()

    before = {"warm": lambda: None, "after its forward block": lambda: block(forward, 0.02),
              "after our executor's block": lambda: block(run, 0.01),
              "after a 20 ms sleep": lambda: time.sleep(0.02)}
    found = {}
    for name, first in before.items():
        times = []
        for _ in range(30):
            first()
            result, leaves = forward()
            fence()
            start = time.perf_counter()
            torch.autograd.grad(result, leaves, upstream)
            fence()
            times.append(time.perf_counter() - start)
        found[name] = statistics.median(times) * 1e6
    return found


for equation, shapes in (("ba,ac->bc", [(16, 8), (8, 4)]), ("ab,bc->ac", [(2, 2), (2, 2)])):
    print(equation, {k: round(v) for k, v in case(equation, shapes).items()})
