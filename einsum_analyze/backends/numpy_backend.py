"""The reference CPU executor in numpy: every event of a schedule, one numpy call each.

Contractions run as ``numpy.einsum`` (BLAS through ``optimize=True`` for two inputs);
numpy's temporaries inside one call are invisible to it, so its memory figure is the
bytes it holds between events.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..memory import Event
from ..strategies import StrategyResult
from ..timing import measure
from .torch_backend import ascii_equation

if TYPE_CHECKING:
    from ..execution import Run, _Context
    from ..report import Report

__all__ = ["run_events_numpy", "run_strategy_numpy"]


def _owner(array: Any) -> Any:
    while getattr(array, "base", None) is not None:
        array = array.base
    return array


def _held(arrays: Sequence[Any], exclude: set[int]) -> int:
    owners = {id(o): o.nbytes for o in map(_owner, arrays) if id(o) not in exclude}
    return sum(owners.values())


def _diagonal(array: Any, term: str) -> Any:
    import numpy as np

    distinct = "".join(dict.fromkeys(term))
    if len(distinct) == len(term):
        return array
    shape = [array.shape[term.index(c)] for c in distinct]
    strides = [sum(array.strides[p] for p, x in enumerate(term) if x == c) for c in distinct]
    return np.lib.stride_tricks.as_strided(array, shape, strides, writeable=True)


def _arrange(array: Any, labels: str, target: str, sizes: Mapping[str, int]) -> Any:
    import numpy as np

    present = [c for c in target if c in labels]
    moved = np.transpose(array, [labels.index(c) for c in present])
    shaped = moved.reshape([sizes[c] if c in labels else 1 for c in target])
    return np.broadcast_to(shaped, [sizes[c] for c in target])


def _step(event: Event, live: dict[str, Any], upstream: Any, sizes: Mapping[str, int]) -> None:
    """Run one event on the live arrays."""
    import numpy as np

    if event.kind == "free":
        del live[event.tensor]
        return
    lhs, _, out = event.equation.partition("->")
    match event.op:
        case "seed":
            result = upstream.copy()
        case "contract":
            arrays = [live[name] for name in event.inputs]
            if event.phase == "backward" and not event.recompute:
                # Complex gradients follow torch's convention: conj of forward tensors
                # (a recomputed forward step reads them as the forward pass does).
                arrays = [
                    np.conj(a) if name.startswith(("in", "x")) and np.iscomplexobj(a) else a
                    for name, a in zip(event.inputs, arrays, strict=True)
                ]
            result = np.asarray(
                np.einsum(ascii_equation(event.equation), *arrays, optimize=len(arrays) > 1)
            )
            if any(np.shares_memory(result, a) for a in arrays):
                result = result.copy()
            if event.view:
                result = _arrange(result, out, event.view, sizes)
        case "unreduce":
            distinct = "".join(dict.fromkeys(out))
            result = np.zeros([sizes[c] for c in out], dtype=upstream.dtype)
            _diagonal(result, out)[...] = _arrange(live[event.inputs[0]], lhs, distinct, sizes)
        case "view":
            result = _arrange(live.pop(event.inputs[0]), lhs, out, sizes)
        case _:
            raise AssertionError(f"event {event.tensor} has no computation")
    live[event.tensor] = result


def run_events_numpy(
    events: Sequence[Event], live: dict[str, Any], upstream: Any, sizes: Mapping[str, int],
    *, exclude: set[int] | None = None,
) -> int:
    """Run events on ``live`` (updated in place) and return the peak bytes held.

    Arrays whose owner's id is in ``exclude`` (the operands) are not counted.
    """
    peak = 0
    for event in events:
        _step(event, live, upstream, sizes)
        if exclude is not None:
            peak = max(peak, _held(list(live.values()), exclude))
    return peak


def run_strategy_numpy(
    report: Report, strategy: StrategyResult, context: _Context, *, repeats: int, warmup: int
) -> Run:
    """Run one strategy with numpy on the CPU: check it, count its memory, time it."""
    import numpy as np
    import torch

    from ..execution import Run, _relative_error

    sizes = report.equation.size_dict
    operands = {f"in{k}": t.numpy() for k, t in enumerate(context.operands)}
    upstream = context.upstream.numpy()
    forward_events = [e for e in strategy.events if e.phase == "forward"]
    backward_events = [e for e in strategy.events if e.phase == "backward"]
    live = dict(operands)
    peak = run_events_numpy(strategy.events, live, upstream, sizes,
                            exclude={id(_owner(a)) for a in operands.values()})
    error = None
    if context.grad:
        error = max(
            _relative_error(torch.from_numpy(np.array(live[f"d{k}"], copy=True)),
                            context.oracle[k])
            for k in context.grad
        )
    del live

    def forward(_: Any = None) -> dict[str, Any]:
        state = dict(operands)
        run_events_numpy(forward_events, state, upstream, sizes)
        return state

    def backward(state: dict[str, Any]) -> None:
        run_events_numpy(backward_events, state, upstream, sizes)

    forward_m = measure(forward, repeats=repeats, warmup=warmup)
    backward_m = (measure(backward, setup=forward, repeats=repeats, warmup=warmup)
                  if backward_events else None)
    held_peak = max(strategy.memory.live_bytes, default=0) - strategy.memory.input_bytes
    return Run(
        strategy=strategy.name,
        is_baseline=False,
        device="cpu",
        backend="numpy",
        forward=forward_m,
        backward=backward_m,
        peak_bytes_measured=int(peak),
        peak_bytes_predicted=int(max(held_peak, 0)),
        retained_bytes_measured=None,
        retained_bytes_predicted=strategy.memory.retained_bytes,
        max_grad_error=error,
        measurement="numpy arrays held between events, above the inputs",
    )
