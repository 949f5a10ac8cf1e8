"""A deliberately plain slice runner for the launch and failure tests (not the sliced strategy).

It keeps the promise :class:`einsum_analyze.distributed.contract.SliceRunner` states:
any subset of slices into full-size buffers summed over that subset. Each slice narrows
the sliced labels to one value in every operand (and in the upstream gradient) and lets
torch.autograd differentiate torch.einsum of the pieces.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class StandInSlices:
    equation: str  # explicit, torch-readable
    sizes: tuple[tuple[str, int], ...]
    sliced: str
    itemsize: int = 8

    @property
    def slice_count(self) -> int:
        size = dict(self.sizes)
        count = 1
        for label in self.sliced:
            count *= size[label]
        return count

    def slice_costs(self) -> Sequence[float]:
        return [1.0] * self.slice_count

    def predicted_peak_bytes(self, slices: Sequence[int], *, is_cuda: bool) -> int | None:
        return None

    def _values(self, number: int) -> dict[str, int]:
        size = dict(self.sizes)
        ranges = [range(size[label]) for label in self.sliced]
        return dict(zip(self.sliced, list(itertools.product(*ranges))[number], strict=True))

    @staticmethod
    def _narrow(tensor: Any, labels: str, values: Mapping[str, int]) -> Any:
        for dim, label in enumerate(labels):
            if label in values:
                tensor = tensor.narrow(dim, values[label], 1)
        return tensor

    def run(self, slices: Sequence[int], operands: Sequence[Any], upstream: Any | None,
            grad: Sequence[int]) -> tuple[Any, Mapping[int, Any]]:
        import torch

        inputs, output_labels = self.equation.split("->")
        labels = inputs.split(",")
        size = dict(self.sizes)
        out = torch.zeros([size[c] for c in output_labels], dtype=operands[0].dtype,
                          device=operands[0].device)
        grads = {k: torch.zeros_like(operands[k]) for k in grad} if upstream is not None else {}
        for number in slices:
            values = self._values(number)
            with torch.enable_grad():
                pieces = [self._narrow(t, s, values).detach().requires_grad_(k in grads)
                          for k, (t, s) in enumerate(zip(operands, labels, strict=True))]
                y = torch.einsum(self.equation, *pieces)
                self._narrow(out, output_labels, values).add_(y.detach())
                if grads:
                    g = self._narrow(upstream, output_labels, values)
                    got = torch.autograd.grad(y, [pieces[k] for k in grad], g)
                    for k, piece in zip(grad, got, strict=True):
                        self._narrow(grads[k], labels[k], values).add_(piece)
        return out, grads


def children() -> set[int]:
    """Pids of this process's live children, read from /proc (every thread's list).

    multiprocessing's resource tracker (one per parent, started with the first spawn
    and kept for the parent's life) is not a rank and is left out.
    """
    found: set[int] = set()
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        try:
            found.update(int(pid) for pid in (task / "children").read_text().split())
        except OSError:
            continue
    return {pid for pid in found if "resource_tracker" not in _cmdline(pid)}


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""
