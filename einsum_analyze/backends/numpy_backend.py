"""The reference CPU executor in numpy: every event of a schedule, one numpy call each.

Contractions run as ``numpy.einsum`` (BLAS through ``optimize=True`` for two inputs),
whose temporaries inside one call the model does not plan; the measured figure is what
``tracemalloc`` traces (numpy reports every buffer to it), so they show. numpy only:
this module never imports torch (the operands arrive as cpu tensors and are viewed
with ``.numpy()``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..model.memory import Event
from .base import CALLER_UPSTREAM, DeviceContext, MemoryFigures
from .relabel import ascii_equation

__all__ = ["NumpyExecutor", "run_events_numpy"]

NUMPY_BASIS = ("tracemalloc (numpy's buffers and the calls' Python objects); retained: "
               "numpy's buffers alone")


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


def _part(term: str, ranges: Sequence[tuple[str, int, int]]) -> tuple[slice, ...]:
    bounds = {label: slice(start, stop) for label, start, stop in ranges}
    return tuple(bounds.get(char, slice(None)) for char in term)


def _step(event: Event, live: dict[str, Any], upstream: Any, sizes: Mapping[str, int]) -> None:
    """Run one event on the live arrays."""
    import numpy as np

    if event.kind == "free":
        del live[event.tensor]
        return
    lhs, _, out = event.equation.partition("->")
    match event.op:
        case "seed":
            # The caller's gradient, read in place (nothing writes it); a complex one is
            # a copy, as the torch executor's is, so that one model serves both.
            result = upstream.copy() if np.iscomplexobj(upstream) else upstream
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
        case "zeros":
            result = np.zeros([sizes[c] for c in out], dtype=upstream.dtype)
        case "slice" | "slice_copy":
            result = live[event.inputs[0]][_part(lhs, event.ranges)]
            if event.op == "slice_copy":
                result = np.ascontiguousarray(result).copy()
        case "accumulate":
            buffer_name, part_name = event.inputs
            result = live.pop(buffer_name)
            result[_part(lhs.partition(",")[0], event.ranges)] += live[part_name]
        case _:
            raise AssertionError(f"event {event.tensor} has no computation")
    live[event.tensor] = result


def run_events_numpy(
    events: Sequence[Event], live: dict[str, Any], upstream: Any, sizes: Mapping[str, int],
    *, exclude: set[int] | None = None,
) -> int:
    """Run events on ``live`` (updated in place) and return the peak bytes held.

    Arrays whose owner's id is in ``exclude`` (the operands) are not counted. The
    caller's ``upstream`` counts from the seed on: the caller holds it to the end.
    """
    peak = 0
    seeded = False
    for event in events:
        _step(event, live, upstream, sizes)
        seeded = seeded or event.op == "seed"
        if exclude is not None:
            held = [*live.values(), upstream] if seeded else list(live.values())
            peak = max(peak, _held(held, exclude))
    return peak


class _Program:
    def __init__(self, events: Sequence[Event], sizes: Mapping[str, int],
                 context: DeviceContext) -> None:
        self.sizes = sizes
        self.operands = {f"in{k}": t.numpy() for k, t in enumerate(context.operands)}
        self.upstream = context.upstream.numpy()
        self.forward = [e for e in events if e.phase == "forward"]
        self.backward = [e for e in events if e.phase == "backward"]
        self.grad = context.grad


class NumpyExecutor:
    """Our schedules with numpy on the cpu (registered as ``numpy``)."""

    name = "numpy"

    def unavailable(self, device: str, dtype: str) -> str | None:
        """Numpy runs on the cpu, and has no bfloat16."""
        if device != "cpu":
            return f"the numpy backend runs on cpu only, not {device}"
        if dtype == "bfloat16":
            return "numpy has no bfloat16; use --backend torch"
        return None

    def compile(self, events: Sequence[Event], sizes: Mapping[str, int],
                context: DeviceContext) -> _Program:
        """Split the schedule by phase; view the operands as numpy arrays."""
        return _Program(events, sizes, context)

    def forward(self, program: _Program) -> dict[str, Any]:
        """The forward events on the operands."""
        state = dict(program.operands)
        run_events_numpy(program.forward, state, program.upstream, program.sizes)
        return state

    def prepare_backward(self, program: _Program, state: dict[str, Any]) -> dict[str, Any]:
        """The caller's upstream gradient, made fresh between the phases.

        The state holds it until backward returns; the seed reads it in place.
        """
        state[CALLER_UPSTREAM] = program.upstream.copy()
        return state

    def backward(self, program: _Program, state: dict[str, Any]) -> dict[str, Any]:
        """The backward events."""
        upstream = state.get(CALLER_UPSTREAM, program.upstream)
        run_events_numpy(program.backward, state, upstream, program.sizes)
        return state

    def has_backward(self, program: _Program) -> bool:
        """Whether anything is differentiated."""
        return bool(program.backward)

    def gradients(self, program: _Program, state: dict[str, Any]) -> Mapping[int, Any]:
        """The gradients, by operand position."""
        return {k: state[f"d{k}"] for k in program.grad}

    def measure_memory(self, program: _Program) -> MemoryFigures:
        """The peak that tracemalloc traces (numpy reports its buffers to it)."""
        import tracemalloc

        import numpy as np

        if tracemalloc.is_tracing():
            raise RuntimeError("tracemalloc is already tracing; the numpy figure needs it")
        tracemalloc.start()
        try:
            state = self.backward(program, self.prepare_backward(program,
                                                                 self.forward(program)))
            _, peak = tracemalloc.get_traced_memory()
            del state
            state = self.forward(program)
            # What forward leaves: numpy's buffers alone (its tracemalloc domain).
            numpy_only = tracemalloc.DomainFilter(inclusive=True,
                                                  domain=np.lib.tracemalloc_domain)
            snapshot = tracemalloc.take_snapshot().filter_traces([numpy_only])
            retained = sum(stat.size for stat in snapshot.statistics("filename"))
            name = next((e.tensor for e in reversed(program.forward) if e.kind != "free"), "")
            output = _owner(state[name]).nbytes if name else 0
            del state, snapshot
        finally:
            tracemalloc.stop()
        return MemoryFigures(int(peak), int(retained - output), NUMPY_BASIS)
