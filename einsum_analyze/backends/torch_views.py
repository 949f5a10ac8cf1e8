"""Chains of view operations replayed as one ``as_strided`` (the executor's hot path).

A compiled event reads its inputs through views: a diagonal, squeezes, a permutation, a
reshape into the ``bmm`` operand, a transpose, an ``expand``. Each is one call into
torch, about a microsecond on a small tensor, and an event may make eight of them. The
event's tensors have shapes fixed by the schedule, so a chain's result depends only on
its input's strides: :class:`ViewChain` runs the chain once per stride it meets, keeps
the result's sizes, strides and storage offset (relative to the input's), and makes one
``as_strided`` on later calls, or none when the chain leaves its input as it is.

Views change no storage and allocate nothing, so the memory a schedule measures is
unchanged.

The view helpers the compiled events share (:func:`diagonal_view`, :func:`arrange`,
:func:`finish`) live here too. torch is not imported here: they are given tensors.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["ViewChain", "arrange", "contiguous_strides", "diagonal_view", "finish"]

_RUN = object()
"""Not learnt yet, or a memo entry: run the chain itself (its result is not a view of
its input)."""

_MEMO_BOUND = 16
"""Strides remembered per chain; past it, new strides run the chain each time."""


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major strides of ``shape``, as torch gives a fresh tensor.

    Example:
        >>> contiguous_strides((2, 3, 4))
        (12, 4, 1)
    """
    strides: list[int] = []
    step = 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


class ViewChain:
    """``chain(tensor)`` for a tensor of fixed shape, as one ``as_strided`` once learnt.

    Args:
        chain: Views only (no copy, no allocation: the result shares the tensor's
            storage) of a tensor whose shape is always the same; the result may be the
            tensor itself.

    Example:
        >>> import torch
        >>> chain = ViewChain(lambda t: t.permute(1, 0).unsqueeze(0))
        >>> x = torch.arange(6.0).view(2, 3)
        >>> torch.equal(chain(x), x.permute(1, 0).unsqueeze(0))
        True
        >>> torch.equal(chain(x), x.t().unsqueeze(0))  # the second call: one as_strided
        True
    """

    __slots__ = ("chain", "memo")

    def __init__(self, chain: Callable[[Any], Any]) -> None:
        self.chain = chain
        self.memo: dict[tuple[int, ...], Any] = {}

    def __call__(self, tensor: Any) -> Any:
        """The chain's result on ``tensor``."""
        stride = tensor.stride()
        layout = self.memo.get(stride, _RUN)
        if layout is None:
            return tensor
        if layout is _RUN:
            return self._learn(tensor, stride)
        size, strides, shift = layout
        if shift:
            return tensor.as_strided(size, strides, tensor.storage_offset() + shift)
        return tensor.as_strided(size, strides)

    def _learn(self, tensor: Any, stride: tuple[int, ...]) -> Any:
        result = self.chain(tensor)
        if stride in self.memo or len(self.memo) >= _MEMO_BOUND:
            return result  # known to run the chain, or no room left
        entry: Any
        if result is not tensor and tensor.device.type != "meta" and (
                result.untyped_storage().data_ptr() != tensor.untyped_storage().data_ptr()):
            entry = _RUN  # a copy, not a view: run the chain each time
        elif result is tensor or (result.shape == tensor.shape and result.stride() == stride
                                and result.storage_offset() == tensor.storage_offset()):
            entry = None
        else:
            entry = (tuple(result.shape), tuple(result.stride()),
                     result.storage_offset() - tensor.storage_offset())
        self.memo[stride] = entry
        return result


def diagonal_view(tensor: Any, term: str) -> Any:
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


def arrange(source: Any, labels: str, target: str) -> Any:
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


def finish(result: Any, term: str, view_term: str, sizes: Mapping[str, int]) -> Any:
    """``result`` (labels ``term``) shown in ``view_term`` (broadcast), if one is given."""
    if not view_term:
        return result
    return arrange(result, term, view_term).expand([sizes[c] for c in view_term])
