"""The measured memory timeline of one CUDA run, from the caching allocator's own history.

``torch.cuda.memory._record_memory_history`` records every allocation and free the
allocator makes. One forward + backward of a strategy is run under it (after an
unrecorded warm-up run, which creates library handles and their workspaces), and the
trace is turned into the allocated total after each allocator event, the operands
included, so that it overlays the predicted timeline (``strategies[].timeline``) on one
axis. The report carries it as ``measured_timelines`` (docs/schema.md); the timeline
figure draws it as a dotted line over its strategy's prediction.

torch is imported inside the functions only; :func:`allocated_from_trace` is pure and
is tested without a GPU.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..backends.base import allocated_bytes, make_context
from ..backends.registry import get_backend
from ..strategies import runs_on_our_executor

if TYPE_CHECKING:
    from ..report.report import Report

__all__ = ["MAX_TRACE_POINTS", "allocated_from_trace", "record_timelines"]

MAX_TRACE_POINTS = 20_000
"""Entries kept per timeline: a longer trace keeps the maximum of each bucket."""


def allocated_from_trace(trace: Iterable[Mapping[str, Any]], start_bytes: int, *,
                         limit: int = MAX_TRACE_POINTS) -> list[int]:
    """Allocated bytes after each allocation and each completed free of a trace.

    Args:
        trace: One device's entries of ``torch.cuda.memory._snapshot()["device_traces"]``
            (``action`` and ``size`` are read; segment and other actions are ignored).
        start_bytes: Bytes allocated when recording began (the operands).
        limit: Entries kept: a longer trace keeps the maximum of each bucket.

    Example:
        >>> allocated_from_trace([{"action": "alloc", "size": 512},
        ...                       {"action": "segment_alloc", "size": 2097152},
        ...                       {"action": "free_requested", "size": 512},
        ...                       {"action": "free_completed", "size": 512}], 1024)
        [1536, 1024]
    """
    total = start_bytes
    out: list[int] = []
    for entry in trace:
        action = entry.get("action")
        if action == "alloc":
            total += int(entry["size"])
        elif action == "free_completed":
            total -= int(entry["size"])
        else:
            continue
        out.append(total)
    return _bucket_max(out, limit)


def _trace(snapshot: Mapping[str, Any], index: int) -> list[Mapping[str, Any]]:
    traces = snapshot.get("device_traces", [])
    return list(traces[index]) if index < len(traces) else []


def _bucket_max(values: Sequence[int], limit: int) -> list[int]:
    if len(values) <= limit:
        return list(values)
    width = -(-len(values) // limit)
    return [max(values[i:i + width]) for i in range(0, len(values), width)]


def record_timelines(report: Report, device: str, *, seed: int = 0) -> list[dict[str, Any]]:
    """Record one forward + backward of each of the report's strategies on ``device``.

    torch autograd's model is left out: its timeline is torch's, not a schedule's.

    Returns:
        The report's ``measured_timelines`` entries: ``strategy``, ``device``,
        ``start_bytes`` (the operands, as the allocator holds them),
        ``allocated_bytes`` (after each allocator event, the operands included) and
        ``backward_start`` (the index of its first backward entry).
    """
    import torch

    executor = get_backend("torch")
    eq = report.equation
    grad = report.grad_operands
    context = make_context(
        device=device, dtype=report.dtype, shapes=eq.shapes,
        output_shape=[eq.size_dict[c] for c in eq.output], text=eq.text,
        explicit=eq.explicit, seed=seed, grad=grad, check=False,
    )
    index = torch.device(device).index or 0
    start = sum(allocated_bytes(t.untyped_storage().nbytes(), True) for t in context.operands)
    found: list[dict[str, Any]] = []
    for strategy in report.strategies:
        if not runs_on_our_executor(strategy.name):
            continue
        program = executor.compile(strategy.events, strategy.sizes(eq.size_dict), context)

        warm = executor.backward(program, executor.prepare_backward(
            program, executor.forward(program)))
        del warm
        torch.cuda.synchronize(index)
        torch.cuda.memory._record_memory_history(
            enabled="all", context=None, stacks="python", max_entries=1_000_000, device=index,
            clear_history=True)
        try:
            state = executor.forward(program)
            torch.cuda.synchronize(index)
            middle = _trace(torch.cuda.memory._snapshot(index), index)
            state = executor.backward(program, executor.prepare_backward(program, state))
            torch.cuda.synchronize(index)
            trace = _trace(torch.cuda.memory._snapshot(index), index)
        finally:
            torch.cuda.memory._record_memory_history(enabled=None, device=index)
        del state
        forward = allocated_from_trace(middle, start, limit=MAX_TRACE_POINTS // 2)
        backward = allocated_from_trace(trace[len(middle):], forward[-1] if forward else start,
                                        limit=MAX_TRACE_POINTS // 2)
        found.append({"strategy": strategy.name, "device": device, "start_bytes": start,
                      "allocated_bytes": forward + backward, "backward_start": len(forward)})
    return found
