"""A plan's result copied into torch.einsum's layout, counted in the plan's model.

Where a schedule's last forward step writes its result in another memory order than
torch.einsum's (``ij,jk->ik`` computed as ``(k, i)`` and viewed back), the drop-in copies
the result into torch's layout, so that ``.view()`` works wherever it does on torch's
result. :func:`with_layout_copy` puts that copy into the strategy's model: one more
forward event allocates the copy (a ``slice_copy`` of the whole result, which moves
its elements once) and the schedule's own result is freed after it; the memory replay
is run again over the new events, so the plan's peak counts both tensors at once.

:func:`written_in_layout` tries first to do without the copy: where the last forward
step is a product of two of the caller's operands (contiguous, their layouts known), it
asks the lowering for a kernel that writes torch's memory order directly
(:func:`einsum_analyze.model.kernels.lower_to_layout`), and takes it when the kernel
copies fewer elements than the result's copy would. The plan cache checks on the
``meta`` device that the new kernel does write torch's layout before it keeps it.

It imports no torch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from ..model.kernels import Layout, copied_elements, lower_to_layout
from ..model.memory import simulate_memory
from ..model.schedule import Event
from ..strategies import StrategyResult

__all__ = ["storage_elements", "with_layout_copy", "written_in_layout"]


def written_in_layout(result: StrategyResult, output: str,
                      layout: tuple[Sequence[int], Sequence[int]],
                      sizes: Mapping[str, int], dtype: str) -> StrategyResult | None:
    """``result`` whose last forward product writes ``output`` in ``layout`` (torch's).

    None where the product is not of two of the caller's operands, no kernel writes
    that order, or the kernel would copy at least as many elements as the result's copy.

    Example:
        >>> from einsum_analyze import analyze
        >>> (reverse,) = analyze("ij,jk->ik", [(2, 3), (3, 4)], grad=[0, 1],
        ...                      strategies=["reverse"]).strategies
        >>> direct = written_in_layout(reverse, "x2", ((2, 4), (4, 1)),
        ...                            {"i": 2, "j": 3, "k": 4}, "float32")
        >>> [e.kernel.out_order for e in direct.events if e.tensor == "x2"][0]
        ('i', 'k')
    """
    events = list(result.events)
    index = next((k for k in reversed(range(len(events))) if events[k].phase == "forward"
                  and events[k].kind == "alloc" and events[k].tensor == output), None)
    if index is None:
        return None
    event = events[index]
    lhs, _, term = event.equation.partition("->")
    terms = lhs.split(",")
    shape, strides = layout
    if (event.op != "contract" or event.kernel is None or event.view or len(terms) != 2
            or not all(_is_operand(name) for name in event.inputs)
            or len(term) != len(shape) or len(set(term)) != len(term)):
        return None
    stride = dict(zip(term, strides, strict=True))
    target = tuple(sorted((c for c in term if sizes[c] != 1), key=lambda c: -stride[c]))
    kernel = lower_to_layout([Layout.contiguous(t, sizes) for t in terms], term, sizes,
                             target)
    if kernel is None or (copied_elements(kernel, sizes)
                          - copied_elements(event.kernel, sizes) >= event.elements):
        return None
    events[index] = event._replace(kernel=kernel, workspace=kernel.workspace)
    return _replayed(result, events, event.elements, result.memory.itemsize,
                     upstream_copy=dtype.startswith("complex"))


def _is_operand(name: str) -> bool:
    return name.startswith("in") and name[2:].isdigit()


def _replayed(result: StrategyResult, events: list[Event], output_elements: int,
              itemsize: int, upstream_copy: bool = False) -> StrategyResult:
    """``result`` with ``events`` and their memory replay."""
    replay = simulate_memory(events, input_elements=result.memory.input_bytes // itemsize,
                             output_elements=output_elements, itemsize=itemsize,
                             upstream_copy=upstream_copy)
    return dataclasses.replace(result, events=tuple(events), memory=replay)


def with_layout_copy(result: StrategyResult, output: str, dtype: str,
                     layout: tuple[Sequence[int], Sequence[int]] | None = None
                     ) -> StrategyResult:
    """``result`` with its forward result ``output`` copied once more at the end of forward.

    ``layout`` is the copy's shape and strides (torch's; None: dense). Where its strides
    leave gaps (torch's result of ``ii->i`` is a diagonal view, of stride ``n + 1``), the
    copy's storage spans them, and the model counts that span (:func:`storage_elements`),
    as the allocator does.

    Example:
        >>> from einsum_analyze import analyze
        >>> (reverse,) = analyze("ij,jk->ik", [(2, 3), (3, 4)], grad=[0, 1],
        ...                      strategies=["reverse"]).strategies
        >>> copied = with_layout_copy(reverse, "x2", "float32")
        >>> copied.memory.forward_peak_bytes - reverse.memory.forward_peak_bytes
        32
    """
    events = list(result.events)
    last = max(k for k, e in enumerate(events) if e.phase == "forward")
    made = next(e for e in reversed(events[:last + 1])
                if e.kind == "alloc" and e.tensor == output)
    term = made.equation.partition("->")[2] if made.equation else ""
    if made.view:
        term = made.view
    held = made.elements if layout is None else max(made.elements, storage_elements(*layout))
    copy = Event(kind="alloc", tensor=f"{output}.torch", elements=held,
                 phase="forward", op="slice_copy", inputs=(output,),
                 equation=f"{term}->{term}")
    added = [copy]
    if made.op != "view":  # a view's storage is its base's: freeing it releases nothing
        added.append(Event(kind="free", tensor=output, elements=made.elements,
                           phase="forward"))
    events[last + 1:last + 1] = added
    return _replayed(result, events, held, result.memory.itemsize,
                     upstream_copy=dtype.startswith("complex"))


def storage_elements(shape: Sequence[int], strides: Sequence[int]) -> int:
    """Elements of the storage ``torch.empty_strided(shape, strides)`` allocates.

    Example:
        >>> storage_elements((3,), (4,))  # the diagonal of a 3 x 3 matrix
        9
        >>> storage_elements((2, 3), (1, 2))
        6
    """
    if 0 in shape:
        return 0
    return 1 + sum((size - 1) * stride for size, stride in zip(shape, strides, strict=True))
