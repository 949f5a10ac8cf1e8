"""Run a schedule event by event with torch, holding exactly the tensors it names.

torch is imported inside the functions: importing this module costs nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..memory import Event

__all__ = ["ExecutionResult", "ascii_equation", "run_schedule", "torch_available"]

_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def torch_available() -> bool:
    """Whether torch can be imported here."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def ascii_equation(equation: str) -> str:
    """Relabel an equation with ASCII letters, which torch.einsum requires.

    Example:
        >>> ascii_equation("\\u00e0b,b->\\u00e0")
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
            mapping[char] = next(c for c in _LETTERS if c not in mapping.values())
        out.append(mapping[char])
    return "".join(out)


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutionResult:
    """What running a schedule produced.

    Attributes:
        output: The forward result.
        gradients: Gradient of each differentiated operand, by position.
        live_bytes: Bytes held after every event (operands included), counted over
            distinct storages: the executor's own accounting.
    """

    output: Any
    gradients: Mapping[int, Any]
    live_bytes: tuple[int, ...]


def _diagonal_view(tensor: Any, term: str) -> tuple[Any, str]:
    """A strided view of ``tensor`` with one axis per distinct label of ``term``."""
    distinct = "".join(dict.fromkeys(term))
    if len(distinct) == len(term):
        return tensor, term
    sizes, strides = [], []
    for char in distinct:
        positions = [p for p, c in enumerate(term) if c == char]
        sizes.append(tensor.shape[positions[0]])
        strides.append(sum(tensor.stride(p) for p in positions))
    return tensor.as_strided(sizes, strides, tensor.storage_offset()), distinct


def _arrange(source: Any, source_labels: str, target_labels: str) -> Any:
    """View ``source`` (distinct labels) in the order of ``target_labels``, broadcasting
    along labels it lacks."""
    present = [char for char in target_labels if char in source_labels]
    permuted = source.permute([source_labels.index(char) for char in present])
    shape = []
    for char in target_labels:
        shape.append(permuted.shape[present.index(char)] if char in source_labels else 1)
    return permuted.reshape(shape) if permuted.dim() != len(shape) else permuted


def _unreduce(source: Any, source_labels: str, target: str, sizes: Mapping[str, int]) -> Any:
    import torch

    shape = [sizes[char] for char in target]
    has_diagonal = len(set(target)) < len(target)
    maker = torch.zeros if has_diagonal else torch.empty
    out = maker(shape, dtype=source.dtype, device=source.device)
    view, distinct = _diagonal_view(out, target)
    arranged = _arrange(source, source_labels, distinct)
    view.copy_(arranged.expand([sizes[char] for char in distinct]))
    return out


def _view(source: Any, source_labels: str, target: str, sizes: Mapping[str, int]) -> Any:
    arranged = _arrange(source, source_labels, target)
    return arranged.expand([sizes[char] for char in target])


def _storage_key(tensor: Any) -> tuple[int, int]:
    storage = tensor.untyped_storage()
    return storage.data_ptr(), storage.nbytes()


def run_schedule(
    events: Sequence[Event],
    operands: Sequence[Any],
    upstream: Any,
    size_dict: Mapping[str, int],
    *,
    track_memory: bool = True,
) -> ExecutionResult:
    """Run ``events`` with torch on the given operands.

    Args:
        events: A strategy's schedule.
        operands: The caller's tensors, in operand order.
        upstream: The upstream gradient (shape of the output), used by ``seed`` events.
        size_dict: Size of every label.
        track_memory: Count the bytes held after every event (CPU accounting).

    Returns:
        The :class:`ExecutionResult`.
    """
    import torch

    live: dict[str, Any] = {f"in{k}": t for k, t in enumerate(operands)}
    labels: dict[str, str] = {}
    input_keys = {_storage_key(t) for t in operands}
    after: list[int] = []
    output_name = ""
    with torch.no_grad():
        for event in events:
            if event.kind == "free":
                del live[event.tensor]
            else:
                result, result_labels = _compute(event, live, labels, upstream, size_dict)
                live[event.tensor] = result
                labels[event.tensor] = result_labels
                for name, _ in event.consumes:
                    del live[name]
                if event.phase == "forward":
                    output_name = event.tensor
            if track_memory:
                seen: dict[int, int] = {}
                for tensor in live.values():
                    pointer, nbytes = _storage_key(tensor)
                    seen[pointer] = nbytes
                total = sum(seen.values())
                total += sum(n for p, n in input_keys if p not in seen)
                after.append(total)
    gradients = {int(name[1:]): t for name, t in live.items() if name.startswith("d")}
    return ExecutionResult(output=live[output_name], gradients=gradients,
                           live_bytes=tuple(after))


def _compute(
    event: Event,
    live: Mapping[str, Any],
    labels: Mapping[str, str],
    upstream: Any,
    size_dict: Mapping[str, int],
) -> tuple[Any, str]:
    import torch

    lhs, _, out_term = event.equation.partition("->")
    match event.op:
        case "seed":
            return upstream.clone(), out_term
        case "contract":
            inputs = [live[name] for name in event.inputs]
            result = torch.einsum(ascii_equation(event.equation), *inputs)
            owners = {_storage_key(t)[0] for t in inputs}
            pointer, nbytes = _storage_key(result)
            if pointer in owners or nbytes != result.numel() * result.element_size():
                # A view of an input or of a larger buffer: give the step its own tensor.
                result = result.clone(memory_format=torch.contiguous_format)
            if event.view:
                return _view(result, out_term, event.view, size_dict), event.view
            return result, out_term
        case "unreduce":
            source = live[event.inputs[0]]
            return _unreduce(source, lhs, out_term, size_dict), out_term
        case "view":
            source = live[event.inputs[0]]
            return _view(source, lhs, out_term, size_dict), out_term
        case _:
            raise AssertionError(f"event {event.tensor} has no computation ({event.op!r})")
