"""A sliced einsum inside a training loop that already runs torch.distributed.

Every rank calls :func:`sliced_einsum` with the same operands (replicated, as a
``torchrun`` job holds its parameters) and gets the whole output; each rank contracts
only its share of the slices, and the output and the gradients cross as :mod:`.comm`
plans them (parts of sliced buffers gathered from their owners, the rest summed with
``all_reduce``; a runner that knows no slice geometry has every buffer all-reduced).
The loss must be the same on every rank (computed from the reduced output, which is),
so that the upstream gradient is too.

Forward contracts the rank's slices for the output only; backward runs each slice
forward again and then backward with its slice of the upstream gradient (a slice keeps
nothing across the step: that is what bounds its peak), one extra forward per step.

Example (docs/distributed.md)::

    torchrun --nproc-per-node 2 train.py       # train.py:
    dist.init_process_group("nccl"); torch.cuda.set_device(dist.get_rank())
    y = sliced_einsum(runner, a, b)            # same a, b on every rank
    y.square().sum().backward()                # a.grad, b.grad: whole, on every rank
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.distributed as dist

from .assign import choose_assignment
from .comm import OUTPUT
from .contract import SliceRunner
from .worker import reduce_buffers

__all__ = ["rank_slices", "sliced_einsum"]


def rank_slices(runner: SliceRunner, group: Any = None) -> tuple[int, ...]:
    """This rank's slices, balanced by cost over the group's ranks.

    Raises:
        RuntimeError: No process group is initialised.
    """
    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError("sliced_einsum: initialise torch.distributed first "
                           "(dist.init_process_group, as torchrun scripts do)")
    return _assignment(runner, group)[dist.get_rank(group)]


def _assignment(runner: SliceRunner, group: Any) -> tuple[tuple[int, ...], ...]:
    return choose_assignment(runner.slice_costs(), dist.get_world_size(group))


def _exchange(runner: SliceRunner, slices: tuple[int, ...], group: Any, output: Any,
              gradients: dict[int, Any]) -> None:
    """The output (forward) or the gradients (backward) to every rank of the group.

    Planned (:mod:`.comm`) when the slices are this rank's share of the default
    assignment and the gradients are the runner's; else every buffer is all-reduced.
    """
    from .collectives import Exchange

    assignment = _assignment(runner, group)
    rank = dist.get_rank(group)
    planner = getattr(runner, "communication_plan", None)
    forward = output is not None
    if (planner is None or assignment[rank] != slices
            or (not forward and set(gradients) != set(getattr(runner, "grad", ())))):
        reduce_buffers(output, gradients, group)
        return
    plan = planner(assignment, "gather", output=forward, gradients=not forward)
    buffers = {OUTPUT: output} if forward else dict(gradients)
    Exchange(plan, rank, len(slices), group).finish(buffers)


class _Sliced(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, runner: SliceRunner, slices: tuple[int, ...], group: Any,
                *operands: torch.Tensor) -> torch.Tensor:
        ctx.runner, ctx.slices, ctx.group = runner, slices, group
        ctx.grad = tuple(k for k, needs in enumerate(ctx.needs_input_grad[3:]) if needs)
        ctx.save_for_backward(*operands)
        with torch.no_grad():
            output, _ = runner.run(slices, operands, None, ())
        _exchange(runner, slices, group, output, {})
        return output  # type: ignore[no-any-return]

    @staticmethod
    def backward(ctx: Any, upstream: torch.Tensor) -> tuple[Any, ...]:
        operands = ctx.saved_tensors
        with torch.no_grad():
            _, grads = ctx.runner.run(ctx.slices, operands, upstream.contiguous(), ctx.grad)
        _exchange(ctx.runner, ctx.slices, ctx.group, None, dict(grads))
        return (None, None, None, *(grads.get(k) for k in range(len(operands))))


def sliced_einsum(runner: SliceRunner, *operands: torch.Tensor, group: Any = None,
                  slices: Sequence[int] | None = None) -> torch.Tensor:
    """The whole einsum output on every rank, each rank contracting its slices.

    Args:
        runner: The sliced plan's runner for these operands' shapes.
        operands: The same tensors on every rank, on this rank's device.
        group: The process group (default: the world).
        slices: This rank's slices; default :func:`rank_slices`.
    """
    mine = tuple(slices) if slices is not None else rank_slices(runner, group)
    result: torch.Tensor = _Sliced.apply(runner, mine, group, *operands)  # type: ignore[no-untyped-call]
    return result
