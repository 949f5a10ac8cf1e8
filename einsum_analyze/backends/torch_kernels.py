"""Compile a schedule event by event into torch calls, holding exactly the tensors it names.

Each event is compiled once into a small function over a dict of live tensors, so that
timed runs pay no planning. Contractions (:mod:`.torch_contract`) run the kernels chosen
by :mod:`einsum_analyze.model.lowering`: sums of private indices and layout copies into
temporaries, then one ``mm``/``bmm`` or ``mul`` into a fresh output. Nothing else is
allocated, so the device's allocator sees what the memory replay predicts. The views
an event reads are replayed as one ``as_strided`` each (:mod:`.torch_views`).

Complex gradients follow torch's convention (``grad_a = grad_y * conj(b)``). Lazily
conjugated tensors would make ``sum``, ``bmm`` and ``mul`` copy their input silently,
so the backward pass runs in conjugated space instead: the seed conjugates the upstream
gradient in place, every backward contraction reads the forward tensors as they are,
and each finished gradient is conjugated in place over its own storage. Every backward
tensor is then the conjugate of the one the convention defines (``conj(G) * B`` is
``conj(G * conj(B))``; a product of forward tensors alone is the conjugate of the
product of their conjugates), so the gradients are the same, and no kernel copies.

torch is imported inside the functions: importing this module costs nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..model.memory import Event
from .torch_contract import Live, Op, compile_contract
from .torch_views import ViewChain, arrange, diagonal_view

__all__ = ["CompiledSchedule", "Live", "Op", "compile_schedule"]


def _compile_unreduce(event: Event, sizes: Mapping[str, int]) -> Op:

    lhs, _, target_term = event.equation.partition("->")
    (name,) = event.inputs
    target = event.tensor
    shape = [sizes[c] for c in target_term]
    distinct = "".join(dict.fromkeys(target_term))
    zeroed = len(distinct) < len(target_term)
    expanded = [sizes[c] for c in distinct]
    spread = ViewChain(lambda t: arrange(t, lhs, distinct).expand(expanded))
    diagonal = ViewChain(lambda t: diagonal_view(t, target_term))

    def run_unreduce(live: Live, workspace: list[Any]) -> None:
        source = live[name]
        out = source.new_zeros(shape) if zeroed else source.new_empty(shape)
        diagonal(out).copy_(spread(source))
        live[target] = out

    return run_unreduce


def _compile_view(event: Event, sizes: Mapping[str, int]) -> Op:
    lhs, _, target_term = event.equation.partition("->")
    (name,) = event.inputs
    target = event.tensor
    shape = [sizes[c] for c in target_term]
    arranged = ViewChain(lambda t: arrange(t, lhs, target_term).expand(shape))

    def run_view(live: Live, workspace: list[Any]) -> None:
        live[target] = arranged(live.pop(name))

    return run_view


def part_index(term: str, ranges: Sequence[tuple[str, int, int]]) -> tuple[slice, ...]:
    """Index of the part ``ranges`` of a tensor with labels ``term`` (a sliced schedule).

    Example:
        >>> part_index("abb", [("b", 2, 4)])
        (slice(None, None, None), slice(2, 4, None), slice(2, 4, None))
    """
    bounds = {label: slice(start, stop) for label, start, stop in ranges}
    return tuple(bounds.get(char, slice(None)) for char in term)


def _compile_zeros(event: Event, sizes: Mapping[str, int]) -> Op:
    """Zeros of the operands' dtype, on their device.

    The dtype and device are those of any live tensor: operand ``in0`` where it is live,
    else another (a backward that does not read ``in0`` holds the upstream gradient).
    """
    import torch

    term = event.equation.partition("->")[2]
    shape = [sizes[c] for c in term]
    target = event.tensor

    def run_zeros(live: Live, workspace: list[Any]) -> None:
        like = live.get("in0")
        if like is None:
            like = next(iter(live.values()))
        live[target] = torch.zeros(shape, dtype=like.dtype, device=like.device)

    return run_zeros


def _compile_slice(event: Event) -> Op:
    import torch

    full = event.equation.partition("->")[0]
    index = part_index(full, event.ranges)
    (name,) = event.inputs
    target = event.tensor
    copy = event.op == "slice_copy"
    part = ViewChain(lambda t: t[index])

    def run_slice(live: Live, workspace: list[Any]) -> None:
        view = part(live[name])
        if copy:
            out = torch.empty(view.shape, dtype=view.dtype, device=view.device)
            out.copy_(view)
            view = out
        live[target] = view

    return run_slice


def _compile_accumulate(event: Event) -> Op:
    full = event.equation.partition(",")[0]
    index = part_index(full, event.ranges)
    buffer_name, part_name = event.inputs
    target = event.tensor
    part = ViewChain(lambda t: t[index])

    def run_accumulate(live: Live, workspace: list[Any]) -> None:
        buffer = live.pop(buffer_name)
        part(buffer).add_(live[part_name])
        live[target] = buffer

    return run_accumulate


def _compile_free(event: Event) -> Op:
    name = event.tensor

    def run_free(live: Live, workspace: list[Any]) -> None:
        del live[name]

    return run_free


@dataclass(frozen=True, slots=True)
class CompiledSchedule:
    """A schedule as two lists of functions over the live tensors.

    Attributes:
        forward: The forward events' functions.
        backward: The backward events' functions (the first takes the upstream gradient).
        output: Name of the forward result after the forward events.
        seed: Name the upstream gradient takes ("" when nothing is differentiated).
        result: Name that holds the forward result after the backward events too, when
            a later event took it over (``"accumulate"``); "" when it is ``output``.
    """

    forward: tuple[Op, ...]
    backward: tuple[Op, ...]
    output: str
    seed: str
    result: str = ""

    @property
    def final_output(self) -> str:
        """Name of the forward result once every event has run.

        ``result`` where a later event took the output over (a sliced step's buffer);
        else ``output``.
        """
        return self.result or self.output


def compile_schedule(events: Sequence[Event], sizes: Mapping[str, int]) -> CompiledSchedule:
    """Compile every event once (:func:`.torch_backend.run_compiled` runs them)."""
    forward: list[Op] = []
    backward: list[Op] = []
    output = ""
    seed = ""
    result = ""
    for event in events:
        phase = forward if event.phase == "forward" else backward
        if event.kind == "free":
            phase.append(_compile_free(event))
            continue
        match event.op:
            case "zeros":
                phase.append(_compile_zeros(event, sizes))
            case "slice" | "slice_copy":
                phase.append(_compile_slice(event))
            case "accumulate":
                phase.append(_compile_accumulate(event))
                if event.inputs[0] in (output, result):
                    result = event.tensor
            case "contract":
                phase.append(compile_contract(event, sizes))
            case "unreduce":
                phase.append(_compile_unreduce(event, sizes))
            case "view":
                phase.append(_compile_view(event, sizes))
            case "seed":
                seed = event.tensor
                phase.append(_seed_op(event.tensor))
            case _:
                raise AssertionError(f"event {event.tensor} has no computation ({event.op!r})")
        if event.phase == "forward":
            output = event.tensor
    gradients = tuple(dict.fromkeys(
        e.tensor for e in events
        if e.phase == "backward" and e.kind != "free" and _is_gradient(e.tensor)
    ))
    if backward:
        backward[-1] = _then_unconjugate(backward[-1], gradients)
    return CompiledSchedule(tuple(forward), tuple(backward), output, seed,
                            result if result != output else "")


def _is_gradient(name: str) -> bool:
    return name.startswith("d") and name[1:].isdigit()


def _seed_op(name: str) -> Op:
    def run_seed(live: Live, workspace: list[Any]) -> None:
        upstream = live.pop("upstream")
        if upstream.is_complex():
            upstream.conj_physical_()  # the caller's fresh copy: backward's conjugated space
        live[name] = upstream

    return run_seed


def _then_unconjugate(last: Op, gradients: Sequence[str]) -> Op:
    """The last backward event, then conjugated space left.

    Each gradient's storage is conjugated in place, once: no allocation, so the event's
    memory is unchanged.
    """

    def run_last(live: Live, workspace: list[Any]) -> dict[str, Any] | None:
        kept = last(live, workspace)
        done: set[int] = set()
        for name in gradients:
            tensor = live.get(name)
            if tensor is None:
                continue
            if not tensor.is_complex():
                return kept  # the gradients share the operands' dtype
            storage = tensor.untyped_storage()
            if storage.data_ptr() in done:
                continue
            done.add(storage.data_ptr())
            # A broadcast gradient is an expanded view: conjugate its storage, not the view.
            count = storage.nbytes() // tensor.element_size()
            tensor.as_strided((count,), (1,), 0).conj_physical_()
        return kept

    return run_last
