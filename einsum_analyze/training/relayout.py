"""A plan's result copied into torch.einsum's layout, counted in the plan's model.

Where a schedule's last forward step writes its result in another memory order than
torch.einsum's (``ij,jk->ik`` computed as ``(k, i)`` and viewed back), the drop-in copies
the result into torch's layout, so that ``.view()`` works wherever it does on torch's
result. :func:`with_layout_copy` puts that copy into the strategy's model: one more
forward event allocates the copy (a ``slice_copy`` of the whole result, which moves
its elements once) and the schedule's own result is freed after it; the memory replay
is run again over the new events, so the plan's peak counts both tensors at once.

It imports no torch.
"""

from __future__ import annotations

import dataclasses

from ..model.memory import simulate_memory
from ..model.schedule import Event
from ..strategies import StrategyResult

__all__ = ["with_layout_copy"]


def with_layout_copy(result: StrategyResult, output: str, dtype: str) -> StrategyResult:
    """``result`` with its forward result ``output`` copied once more at the end of forward.

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
    copy = Event(kind="alloc", tensor=f"{output}.torch", elements=made.elements,
                 phase="forward", op="slice_copy", inputs=(output,),
                 equation=f"{term}->{term}")
    added = [copy]
    if made.op != "view":  # a view's storage is its base's: freeing it releases nothing
        added.append(Event(kind="free", tensor=output, elements=made.elements,
                           phase="forward"))
    events[last + 1:last + 1] = added
    memory = result.memory
    itemsize = memory.itemsize
    replay = simulate_memory(events, input_elements=memory.input_bytes // itemsize,
                             output_elements=made.elements, itemsize=itemsize,
                             upstream_copy=dtype.startswith("complex"))
    return dataclasses.replace(result, events=tuple(events), memory=replay)
