"""Run a schedule event by event with torch, holding exactly the tensors it names.

Each event is compiled once into a small function over a dict of live tensors, so that
timed runs pay no planning. Contractions run the kernels chosen by
:mod:`einsum_analyze.lowering`: sums of private indices and layout copies into
temporaries, then one ``bmm`` or ``mul`` written into a freshly allocated output with
``out=``. Nothing else is allocated, so the device's allocator sees what the memory
replay predicts.

torch is imported inside the functions: importing this module costs nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..lowering import InputPrep, Kernel
from ..memory import Event

__all__ = [
    "CompiledSchedule",
    "ExecutionResult",
    "ascii_equation",
    "compile_schedule",
    "run_schedule",
    "torch_available",
]

_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"

Live = dict[str, Any]
Op = Callable[[Live, list[Any]], dict[str, Any] | None]
"""One event: reads and updates the live tensors, appends its temporaries to the list,
and returns the kept copies that replace inputs (applied by the caller), if any."""


def torch_available() -> bool:
    """Whether torch can be imported here."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def ascii_equation(equation: str) -> str:
    r"""Relabel an equation with ASCII letters, which torch.einsum requires.

    Example:
        >>> ascii_equation("\u00e0b,b->\u00e0")
        'ab,b->a'
    """
    mapping: dict[str, str] = {}
    out = []
    for char in equation:
        if char in ",->":
            out.append(char)
            continue
        if char not in mapping:
            if len(mapping) == len(_LETTERS):
                raise ValueError(f"{equation!r} uses more than 52 distinct labels in one step")
            mapping[char] = _LETTERS[len(mapping)]
        out.append(mapping[char])
    return "".join(out)


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

    def __init__(
        self, term: str, prep: InputPrep, sizes: Mapping[str, int], conjugate: bool = False
    ) -> None:
        distinct = "".join(dict.fromkeys(term))
        self.term = term
        self.conjugate = conjugate
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

        if self.conjugate and tensor.is_complex():
            tensor = tensor.conj()
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
    # Complex gradients follow torch's convention: the forward tensors a backward
    # contraction reads enter conjugated (grad_a = grad_y * conj(b)).
    conjugated = tuple(
        event.phase == "backward" and name.startswith(("in", "x")) for name in names
    )

    if kernel is None or kernel.kind == "einsum":
        equation = ascii_equation(event.equation)

        def run_einsum(live: Live, workspace: list[Any]) -> None:
            inputs = [
                live[name].conj() if flag and live[name].is_complex() else live[name]
                for name, flag in zip(names, conjugated, strict=True)
            ]
            result = torch.einsum(equation, *inputs).clone(memory_format=torch.contiguous_format)
            live[target] = _finish(result, out_term, view_term, sizes)

        return run_einsum

    preps = [
        _Input(term, prep, sizes, flag)
        for term, prep, flag in zip(terms, kernel.inputs, conjugated, strict=True)
    ]
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
                source = live[name]
                if prep.conjugate and source.is_complex():
                    source = source.conj()
                view = _diagonal_view(source, prep.term)
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
        output: Name of the forward result.
        seed: Name the upstream gradient takes ("" when nothing is differentiated).
    """

    forward: tuple[Op, ...]
    backward: tuple[Op, ...]
    output: str
    seed: str


def compile_schedule(events: Sequence[Event], sizes: Mapping[str, int]) -> CompiledSchedule:
    """Compile every event once; see :func:`run_schedule` for running them."""
    forward: list[Op] = []
    backward: list[Op] = []
    output = ""
    seed = ""
    for event in events:
        phase = forward if event.phase == "forward" else backward
        if event.kind == "free":
            phase.append(_compile_free(event))
            continue
        match event.op:
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
    return CompiledSchedule(tuple(forward), tuple(backward), output, seed)


def _seed_op(name: str) -> Op:
    def run_seed(live: Live, workspace: list[Any]) -> None:
        live[name] = live.pop("upstream")

    return run_seed


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutionResult:
    """What running a schedule produced.

    Attributes:
        output: The forward result.
        gradients: Gradient of each differentiated operand, by position.
        live_bytes: Bytes held after every event (operands included), counted over
            distinct storages: the executor's own accounting.
        high_bytes: Bytes held at the high point of every event (its output and its
            temporaries allocated).
    """

    output: Any
    gradients: Mapping[int, Any]
    live_bytes: tuple[int, ...]
    high_bytes: tuple[int, ...]


def _held_bytes(tensors: Sequence[Any]) -> int:
    seen: dict[int, int] = {}
    for tensor in tensors:
        storage = tensor.untyped_storage()
        seen[storage.data_ptr()] = storage.nbytes()
    return sum(seen.values())


def run_schedule(
    events: Sequence[Event],
    operands: Sequence[Any],
    upstream: Any,
    size_dict: Mapping[str, int],
    *,
    track_memory: bool = True,
) -> ExecutionResult:
    """Run ``events`` with torch on the given operands, counting held bytes.

    Args:
        events: A strategy's schedule (lowered, or not: unlowered contractions run as
            torch.einsum).
        operands: The caller's tensors, in operand order, contiguous.
        upstream: The upstream gradient, contiguous in the output's labels.
        size_dict: Size of every label.
        track_memory: Count the bytes held after and during every event.

    Returns:
        The :class:`ExecutionResult`.
    """
    import torch

    compiled = compile_schedule(events, size_dict)
    live: Live = {f"in{k}": t for k, t in enumerate(operands)}
    live["upstream"] = upstream
    after: list[int] = []
    high: list[int] = []
    with torch.no_grad():
        for op in compiled.forward + compiled.backward:
            workspace: list[Any] = []
            kept = op(live, workspace)
            if track_memory:
                held = [t for name, t in live.items() if name != "upstream"]
                high.append(_held_bytes(held + workspace))
            if kept:
                live.update(kept)
            del workspace
            if track_memory:
                after.append(_held_bytes([t for n, t in live.items() if n != "upstream"]))
    gradients = {int(name[1:]): t for name, t in live.items() if name.startswith("d")}
    return ExecutionResult(output=live[compiled.output], gradients=gradients,
                           live_bytes=tuple(after), high_bytes=tuple(high))
