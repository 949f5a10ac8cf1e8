"""Train a matrix-product-state (tensor-train) classifier twice: with torch.einsum and
with the drop-in ``einsum_analyze.torch.einsum``; same loss curve, then time and peak.

The model maps each of 6 input features through a local feature map (4 numbers), then
contracts them with a chain of 6 cores (bond 24) into 3 class scores: one einsum of
12 operands per step, the kind whose backward torch.einsum decomposes into many nodes.
Both runs start from the same weights and see the same batches.

    python examples/train_mps.py                 # cpu, under a minute
    python examples/train_mps.py --device cuda   # where there is a GPU

Prints the loss every 50 steps for both, the largest relative gap between the curves,
the median step time and the measured peak of one training step (cpu: the allocator's
events under torch.profiler; CUDA: max_memory_allocated), each against torch.einsum's.
Exits non-zero when the curves differ beyond floating-point tolerance.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import torch

from einsum_analyze.torch import einsum as dropin_einsum

SITES = 6
EQUATION = "na,nb,nc,nd,ne,nf,ap,pbq,qcr,rds,set,tfk->nk"


class MPSClassifier(torch.nn.Module):
    """Features -> local feature map -> MPS contraction -> class scores."""

    def __init__(self, bond: int, classes: int, einsum: Callable[..., torch.Tensor]) -> None:
        super().__init__()
        self.einsum = einsum
        d = 4
        scale = 1.0 / bond**0.5
        self.first = torch.nn.Parameter(torch.randn(d, bond) * scale)
        self.middle = torch.nn.ParameterList(
            [torch.nn.Parameter(torch.randn(bond, d, bond) * scale) for _ in range(SITES - 2)]
        )
        self.last = torch.nn.Parameter(torch.randn(bond, d, classes) * scale)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = [torch.stack([torch.ones_like(x[:, s]), x[:, s], torch.cos(x[:, s]),
                                 torch.sin(x[:, s])], dim=1) for s in range(SITES)]
        return self.einsum(EQUATION, *features, self.first, *self.middle, self.last)


def batches(steps: int, batch: int, device: str) -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(1)
    out = []
    for _ in range(steps):
        x = torch.randn(batch, SITES, generator=generator)
        label = ((x[:, 0] * x[:, 1] + torch.sin(x[:, 2]) - x[:, 3].abs()) > 0).long()
        label = label + (x[:, 4] > 1.0).long()
        out.append((x.to(device), label.to(device)))
    return out


def fence(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def train(model: MPSClassifier, data: list[tuple[torch.Tensor, torch.Tensor]],
          device: str) -> tuple[list[float], float]:
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)
    losses: list[float] = []
    times: list[float] = []
    for x, label in data:
        fence(device)
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), label)
        loss.backward()
        optimizer.step()
        fence(device)
        times.append(time.perf_counter() - start)
        losses.append(float(loss.detach()))
    return losses, statistics.median(times[5:])


def step_peak(model: MPSClassifier, x: torch.Tensor, label: torch.Tensor, device: str) -> int:
    """Measured peak of one forward + backward, above what is held before it."""

    def step() -> Any:
        loss = torch.nn.functional.cross_entropy(model(x), label)
        return torch.autograd.grad(loss, list(model.parameters()))

    step()
    if device.startswith("cuda"):
        fence(device)
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        kept = step()
        fence(device)
        del kept
        return int(torch.cuda.max_memory_allocated() - base)
    from einsum_analyze.backends.torch_backend import allocator_peak_cpu

    return allocator_peak_cpu(step)[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--bond", type=int, default=24)
    parser.add_argument("--tolerance", type=float, default=1e-3,
                        help="largest relative gap allowed between the two loss curves")
    args = parser.parse_args()
    torch.manual_seed(0)
    reference = MPSClassifier(args.bond, 3, torch.einsum).to(args.device)
    ours = copy.deepcopy(reference)
    ours.einsum = dropin_einsum
    data = batches(args.steps, args.batch, args.device)
    start = time.perf_counter()
    torch_losses, torch_step = train(reference, data, args.device)
    our_losses, our_step = train(ours, data, args.device)
    gap = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(our_losses, torch_losses,
                                                               strict=True))
    for step in range(0, args.steps, 50):
        print(f"step {step:4d}  loss torch.einsum {torch_losses[step]:.6f}  "
              f"drop-in {our_losses[step]:.6f}")
    print(f"final       loss torch.einsum {torch_losses[-1]:.6f}  drop-in {our_losses[-1]:.6f}")
    print(f"largest relative gap between the loss curves: {gap:.2e} (tolerance "
          f"{args.tolerance:.0e})")
    x, label = data[0]
    torch_peak = step_peak(reference, x, label, args.device)
    our_peak = step_peak(ours, x, label, args.device)
    print(f"median step: torch.einsum {torch_step * 1e3:.2f} ms, drop-in "
          f"{our_step * 1e3:.2f} ms ({our_step / torch_step:.2f}x)")
    print(f"peak of one step: torch.einsum {torch_peak / 2**20:.2f} MiB, drop-in "
          f"{our_peak / 2**20:.2f} MiB ({our_peak / torch_peak:.2f}x)")
    print(f"device {args.device}, torch {torch.__version__}, wall "
          f"{time.perf_counter() - start:.1f} s")
    return 0 if gap <= args.tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
