"""Run a :class:`.comm.CommPlan` on one rank: pack, issue, wait, unpack.

Every rank issues the plan's transfers in the plan's order (a collective must be called
in the same order everywhere): those of round ``j`` right after its own ``j``-th slice
(with ``overlap``), the rest after its last slice. Each call is asynchronous; the waits
come at the end, so a broadcast issued after slice ``j`` travels while slice ``j + 1``
runs. A packed transfer allocates one contiguous buffer (``torch.empty``: what the
memory model adds, :meth:`.comm.CommPlan.packs`), filled by the ranks that send; after
the wait, the ranks that receive copy it into the regions of their buffers. A region
that travels in place is a view of its buffer. Gloo's all-gather and reduce-scatter
allocate a hidden temporary as large as their output (measured with the cpu
allocator's events), broadcasts and all-reduces none, so the gathers are broadcasts.

torch is imported inside the functions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .comm import FINAL, CommPlan, Region, Transfer

__all__ = ["Exchange"]


def _view(buffers: Mapping[int, Any], region: Region) -> Any:
    return buffers[region.buffer][tuple(slice(a, b) for a, b in region.index)]


class Exchange:
    """One step's collectives on one rank.

    Args:
        plan: The step's plan (the same on every rank).
        rank: This rank.
        rounds: How many slices this rank runs.
        group: The process group (None: the world).
    """

    def __init__(self, plan: CommPlan, rank: int, rounds: int, group: Any = None) -> None:
        self.plan = plan
        self.rank = rank
        self.rounds = rounds
        self.group = group
        self._next = 0
        self._pending: list[tuple[Transfer, Any, Any]] = []

    def _issue(self, transfer: Transfer, buffers: Mapping[int, Any]) -> None:
        import torch
        import torch.distributed as dist

        sends = transfer.kind == "all_reduce" or transfer.source == self.rank
        if transfer.packed:
            like = buffers[transfer.regions[0].buffer]
            tensor = torch.empty(transfer.elements, dtype=like.dtype, device=like.device)
            if sends:
                offset = 0
                for region in transfer.regions:
                    view = _view(buffers, region)
                    tensor[offset:offset + region.elements].view(view.shape).copy_(view)
                    offset += region.elements
        else:
            tensor = _view(buffers, transfer.regions[0])
        if transfer.kind == "all_reduce":
            work = dist.all_reduce(tensor, group=self.group, async_op=True)
        else:
            source = (transfer.source if self.group is None
                      else dist.get_global_rank(self.group, transfer.source))
            work = dist.broadcast(tensor, source, group=self.group, async_op=True)
        self._pending.append((transfer, tensor, work))

    def after_slice(self, position: int, buffers: Mapping[int, Any]) -> None:
        """Issue what this rank may send once its ``position``-th slice has run."""
        if position >= self.rounds - 1:
            return  # after the last slice: :meth:`finish` issues the rest
        transfers = self.plan.transfers
        while self._next < len(transfers) and transfers[self._next].round != FINAL \
                and transfers[self._next].round <= position:
            self._issue(transfers[self._next], buffers)
            self._next += 1

    def finish(self, buffers: Mapping[int, Any]) -> None:
        """Issue the remaining transfers, wait for all, unpack, let the packs go."""
        for transfer in self.plan.transfers[self._next:]:
            self._issue(transfer, buffers)
        self._next = len(self.plan.transfers)
        for _, _, work in self._pending:
            work.wait()
        for transfer, tensor, _ in self._pending:
            if not transfer.packed or (transfer.kind == "broadcast"
                                       and transfer.source == self.rank):
                continue
            offset = 0
            for region in transfer.regions:
                view = _view(buffers, region)
                view.copy_(tensor[offset:offset + region.elements].view(view.shape))
                offset += region.elements
        self._pending.clear()
