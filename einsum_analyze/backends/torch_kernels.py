"""Compile a schedule event by event into torch calls, holding exactly the tensors it names.

Each event is compiled once into a small function over a dict of live tensors, so that
timed runs pay no planning. Contractions run the kernels chosen by
:mod:`einsum_analyze.lowering`: sums of private indices and layout copies into
temporaries, then one ``bmm`` or ``mul`` written into a freshly allocated output with
``out=``. Nothing else is allocated, so the device's allocator sees what the memory
replay predicts.

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

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..lowering import InputPrep, Kernel
from ..memory import Event
from .relabel import ascii_equation

__all__ = ["CompiledSchedule", "Live", "Op", "compile_schedule"]

Live = dict[str, Any]
Op = Callable[[Live, list[Any]], dict[str, Any] | None]
"""One event: reads and updates the live tensors, appends its temporaries to the list,
and returns the kept copies that replace inputs (applied by the caller), if any."""


def _diagonal_view(tensor: Any, term: str) -> Any:
    """A strided view with one axis per distinct label of ``term`` (a diagonal)."""
    distinct = "".join(dict.fromkeys(term))
    if len(distinct) == len(term):
        return tensor
    sizes, strides = [], []
    for char in distinct:
        positions = [p for p, c in enumerate(term) if c == char]
        sizes.append(tensor.shape[positions[0]])
        strides.append(sum(tensor.stride(p) for p in positions))
    return tensor.as_strided(sizes, strides, tensor.storage_offset())


def _arrange(source: Any, labels: str, target: str) -> Any:
    """View ``source`` (distinct ``labels``) with the dims of ``target``.

    The view is permuted, has a size-1 axis for each target label it lacks, and drops
    the size-1 labels it has that the target lacks.
    """
    for position in reversed(range(len(labels))):
        if labels[position] not in target:
            source = source.squeeze(position)
    labels = "".join(c for c in labels if c in target)
    present = [char for char in target if char in labels]
    source = source.permute([labels.index(char) for char in present])
    for position, char in enumerate(target):
        if char not in labels:
            source = source.unsqueeze(position)
    return source


class _Input:
    """Compiled preparation of one contraction input."""

    def __init__(self, term: str, prep: InputPrep, sizes: Mapping[str, int]) -> None:
        distinct = "".join(dict.fromkeys(term))
        self.term = term
        self.drop = tuple(p for p, c in enumerate(distinct) if sizes[c] == 1)
        labels = "".join(c for c in distinct if sizes[c] != 1)
        self.reduce_perm: tuple[int, ...] = ()
        self.reduce_dims: tuple[int, ...] = ()
        self.keep_shape: tuple[int, ...] = ()
        if prep.reduce:
            self.reduce_perm = tuple(labels.index(c) for c in prep.keep + prep.reduce)
            self.reduce_dims = tuple(range(len(prep.keep), len(prep.keep) + len(prep.reduce)))
            self.keep_shape = tuple(sizes[c] for c in prep.keep)
            labels = "".join(prep.keep)
        self.copy_perm: tuple[int, ...] = ()
        self.copy_shape: tuple[int, ...] = ()
        if prep.copy:
            self.copy_perm = tuple(labels.index(c) for c in prep.copy)
            self.copy_shape = tuple(sizes[c] for c in prep.copy)
            labels = "".join(prep.copy)
        self.labels = labels
        self.memory_perm = tuple(labels.index(c) for c in prep.order)

    def __call__(self, tensor: Any, workspace: list[Any]) -> Any:
        import torch

        view = _diagonal_view(tensor, self.term)
        for position in reversed(self.drop):
            view = view.squeeze(position)
        if self.reduce_perm:
            buffer = torch.empty(self.keep_shape, dtype=view.dtype, device=view.device)
            workspace.append(buffer)
            torch.sum(view.permute(self.reduce_perm), dim=self.reduce_dims, out=buffer)
            view = buffer
        if self.copy_perm:
            buffer = torch.empty(self.copy_shape, dtype=view.dtype, device=view.device)
            workspace.append(buffer)
            buffer.copy_(view.permute(self.copy_perm))
            view = buffer
        return view


def _compile_contract(event: Event, sizes: Mapping[str, int]) -> Op:
    import torch

    lhs, _, out_term = event.equation.partition("->")
    terms = lhs.split(",")
    kernel = event.kernel
    names = event.inputs
    target = event.tensor
    view_term = event.view

    if kernel is None or kernel.kind == "einsum":
        equation = ascii_equation(event.equation)

        def run_einsum(live: Live, workspace: list[Any]) -> None:
            inputs = [live[name] for name in names]
            result = torch.einsum(equation, *inputs).clone(memory_format=torch.contiguous_format)
            live[target] = _finish(result, out_term, view_term, sizes)

        return run_einsum

    preps = [_Input(term, prep, sizes) for term, prep in zip(terms, kernel.inputs, strict=True)]
    out_labels = "".join(kernel.out_order)
    out_shape = tuple(sizes[c] for c in kernel.out_order)

    def present(buffer: Any) -> Any:
        return _finish(_arrange(buffer, out_labels, out_term), out_term, view_term, sizes)

    match kernel.kind:
        case "reduce":
            (prep,) = preps
            perm, dims = prep.reduce_perm, prep.reduce_dims
            (name,) = names

            def run_reduce(live: Live, workspace: list[Any]) -> None:
                view = _diagonal_view(live[name], prep.term)
                for position in reversed(prep.drop):
                    view = view.squeeze(position)
                out = torch.empty(out_shape, dtype=view.dtype, device=view.device)
                torch.sum(view.permute(perm), dim=dims, out=out)
                live[target] = present(out)

            return run_reduce
        case "copy":
            (prep,) = preps
            (name,) = names
            perm = prep.memory_perm

            def run_copy(live: Live, workspace: list[Any]) -> None:
                view = prep(live[name], workspace)
                out = torch.empty(out_shape, dtype=view.dtype, device=view.device)
                out.copy_(view.permute(perm))
                live[target] = present(out)

            return run_copy
        case "mul":
            a_prep, b_prep = preps
            a_name, b_name = names

            def run_mul(live: Live, workspace: list[Any]) -> None:
                a = a_prep(live[a_name], workspace)
                b = b_prep(live[b_name], workspace)
                out = torch.empty(out_shape, dtype=a.dtype, device=a.device)
                torch.mul(_arrange(a, a_prep.labels, out_labels),
                          _arrange(b, b_prep.labels, out_labels), out=out)
                live[target] = present(out)

            return run_mul
        case "bmm":
            return _compile_bmm(kernel, preps, names, target, present, sizes)
        case _:
            raise AssertionError(f"unknown kernel {kernel.kind!r}")


def _compile_bmm(
    kernel: Kernel, preps: Sequence[_Input], names: Sequence[str], target: str,
    present: Callable[[Any], Any], sizes: Mapping[str, int],
) -> Op:
    import torch

    a_prep, b_prep = preps
    a_name, b_name = names
    nb = math.prod(sizes[c] for c in kernel.batch)
    nl = math.prod(sizes[c] for c in kernel.left)
    nk = math.prod(sizes[c] for c in kernel.contracted)
    nr = math.prod(sizes[c] for c in kernel.right)
    a_order = kernel.inputs[0].order
    b_order = kernel.inputs[1].order
    nbatch = len(kernel.batch)
    # A is (batch, left, contracted) or (batch, contracted, left) in memory.
    a_left_first = tuple(a_order[nbatch:nbatch + len(kernel.left)]) == kernel.left
    b_contracted_first = tuple(b_order[nbatch:nbatch + len(kernel.contracted)]) == kernel.contracted
    a_shape = (nb, nl, nk) if a_left_first else (nb, nk, nl)
    b_shape = (nb, nk, nr) if b_contracted_first else (nb, nr, nk)

    promoted = [(position, names[position], preps[position]) for position in kernel.promote]

    def run_bmm(live: Live, workspace: list[Any]) -> dict[str, Any] | None:
        a_ready = a_prep(live[a_name], workspace)
        b_ready = b_prep(live[b_name], workspace)
        a = a_ready.permute(a_prep.memory_perm).view(a_shape)
        b = b_ready.permute(b_prep.memory_perm).view(b_shape)
        if not a_left_first:
            a = a.transpose(1, 2)
        if not b_contracted_first:
            b = b.transpose(1, 2)
        out = torch.empty((nb, nl, nr), dtype=a.dtype, device=a.device)
        torch.bmm(a, b, out=out)
        live[target] = present(out.view([sizes[c] for c in kernel.out_order]))
        if not promoted:
            return None
        ready = (a_ready, b_ready)
        return {
            name: _arrange(ready[position], prep.labels, prep.term)
            for position, name, prep in promoted
        }

    return run_bmm


def _finish(result: Any, term: str, view_term: str, sizes: Mapping[str, int]) -> Any:
    if not view_term:
        return result
    return _arrange(result, term, view_term).expand([sizes[c] for c in view_term])


def _compile_unreduce(event: Event, sizes: Mapping[str, int]) -> Op:
    import torch

    lhs, _, target_term = event.equation.partition("->")
    (name,) = event.inputs
    target = event.tensor
    shape = [sizes[c] for c in target_term]
    distinct = "".join(dict.fromkeys(target_term))
    maker = torch.zeros if len(distinct) < len(target_term) else torch.empty
    expanded = [sizes[c] for c in distinct]

    def run_unreduce(live: Live, workspace: list[Any]) -> None:
        source = live[name]
        out = maker(shape, dtype=source.dtype, device=source.device)
        _diagonal_view(out, target_term).copy_(_arrange(source, lhs, distinct).expand(expanded))
        live[target] = out

    return run_unreduce


def _compile_view(event: Event, sizes: Mapping[str, int]) -> Op:
    lhs, _, target_term = event.equation.partition("->")
    (name,) = event.inputs
    target = event.tensor
    shape = [sizes[c] for c in target_term]

    def run_view(live: Live, workspace: list[Any]) -> None:
        live[target] = _arrange(live.pop(name), lhs, target_term).expand(shape)

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
    """Zeros of the operands' dtype, on their device (operand ``in0`` is always live)."""
    import torch

    term = event.equation.partition("->")[2]
    shape = [sizes[c] for c in term]
    target = event.tensor

    def run_zeros(live: Live, workspace: list[Any]) -> None:
        like = live["in0"]
        live[target] = torch.zeros(shape, dtype=like.dtype, device=like.device)

    return run_zeros


def _compile_slice(event: Event) -> Op:
    import torch

    full = event.equation.partition("->")[0]
    index = part_index(full, event.ranges)
    (name,) = event.inputs
    target = event.tensor
    copy = event.op == "slice_copy"

    def run_slice(live: Live, workspace: list[Any]) -> None:
        view = live[name][index]
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

    def run_accumulate(live: Live, workspace: list[Any]) -> None:
        buffer = live.pop(buffer_name)
        buffer[index].add_(live[part_name])
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
                phase.append(_compile_contract(event, sizes))
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
            if tensor is None or not tensor.is_complex():
                continue
            storage = tensor.untyped_storage()
            if storage.data_ptr() in done:
                continue
            done.add(storage.data_ptr())
            # A broadcast gradient is an expanded view: conjugate its storage, not the view.
            count = storage.nbytes() // tensor.element_size()
            tensor.as_strided((count,), (1,), 0).conj_physical_()
        return kept

    return run_last
