"""The one entry point the CLI and notebooks share: :func:`analyze`."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from ._types import DTYPE_ITEMSIZE
from .equation import parse_equation, shapes_from_sizes
from .errors import PlanningError, ShapeError
from .memory import forward_schedule, input_elements, simulate_memory
from .planning import parse_memory_limit, plan_contraction
from .report import Report, environment

__all__ = ["analyze"]


def analyze(
    equation: str,
    shapes: Sequence[Sequence[int]] | None = None,
    *,
    sizes: Mapping[str, int] | None = None,
    optimize: str | Sequence[Sequence[int]] = "auto",
    memory_limit: int | str | None = None,
    dtype: str = "float32",
) -> Report:
    """Analyse an einsum: normalise it, plan its forward path, replay its memory.

    Nothing is allocated and torch is not imported: only labels and sizes are used.

    Args:
        equation: The einsum, e.g. ``"bc,bd,cm,mdn->bn"``.
        shapes: One shape per operand. Give exactly one of ``shapes`` and ``sizes``.
        sizes: The size of every index, e.g. ``{"b": 512, "c": 2}``.
        optimize: An opt_einsum optimizer name or an explicit linear path.
        memory_limit: Largest intermediate for the planner: elements, ``"max_input"`` or a
            byte size such as ``"512MiB"`` (converted with ``dtype``).
        dtype: Element type for byte figures.

    Returns:
        The :class:`Report`.

    Raises:
        EinsumAnalyzeError: Any input the user can fix, with a one-line message.

    Example:
        >>> analyze("ab,bc->ac", [(2, 3), (3, 4)]).plan.flops
        48
    """
    start = time.perf_counter()
    if (shapes is None) == (sizes is None):
        raise ShapeError("give exactly one of shapes and sizes")
    if dtype not in DTYPE_ITEMSIZE:
        raise PlanningError(f"unknown dtype {dtype!r}; choose one of: {', '.join(DTYPE_ITEMSIZE)}")
    itemsize = DTYPE_ITEMSIZE[dtype]
    if shapes is None:
        assert sizes is not None
        shapes = shapes_from_sizes(equation, sizes)
    eq = parse_equation(equation, shapes)
    limit = parse_memory_limit(memory_limit, eq, itemsize)
    plan = plan_contraction(eq, optimize, limit)
    forward = simulate_memory(
        forward_schedule(plan),
        input_elements=input_elements(plan),
        output_elements=plan.steps[-1].output_elements,
        itemsize=itemsize,
    )
    return Report(
        equation=eq,
        dtype=dtype,
        itemsize=itemsize,
        plan=plan,
        forward_memory=forward,
        memory_limit_elements=limit,
        analysis_s=time.perf_counter() - start,
        environment=environment(),
    )
