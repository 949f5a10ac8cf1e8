"""The one entry point the CLI and notebooks share: :func:`analyze`."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from ._types import DTYPE_ITEMSIZE
from .equation import parse_equation, shapes_from_sizes
from .errors import PlanningError, ShapeError
from .lowering import lower_events
from .memory import MemoryProfile, forward_schedule, input_elements, simulate_memory
from .parsing import parse_operand_list
from .planning import parse_memory_limit, plan_contraction
from .report import Report, environment
from .strategies import (
    STRATEGIES,
    GradientPlan,
    StrategyResult,
    StrategySpec,
    build_strategy,
    get_strategy,
    plan_gradients,
)

__all__ = ["analyze"]


def analyze(
    equation: str,
    shapes: Sequence[Sequence[int]] | None = None,
    *,
    sizes: Mapping[str, int] | None = None,
    optimize: str | Sequence[Sequence[int]] = "auto",
    memory_limit: int | str | None = None,
    dtype: str = "float32",
    grad: str | Sequence[int] = "all",
    strategies: Sequence[str] | None = STRATEGIES,
    strategy_options: Mapping[str, Mapping[str, Any]] | None = None,
) -> Report:
    """Analyse an einsum: normalise it, plan its forward path, replay its memory.

    Nothing is allocated and torch is not imported: only labels and sizes are used.

    Args:
        equation: The einsum, e.g. ``"bc,bd,cm,mdn->bn"``.
        shapes: One shape per operand. Give exactly one of ``shapes`` and ``sizes``.
        sizes: The size of every index, e.g. ``{"b": 512, "c": 2}``.
        optimize: An opt_einsum optimizer name or an explicit linear path.
        memory_limit: Largest intermediate, for the forward path and for every gradient
            contraction a strategy plans: elements, ``"max_input"`` or a byte size such
            as ``"512MiB"`` (converted with ``dtype``). A guarantee: a path that breaks
            it is replanned with greedy under it, and the report's warnings say so, or
            say that no path meets it.
        dtype: Element type for byte figures.
        grad: Operands that need a gradient: ``"all"``, ``"none"``, a list of positions,
            or text such as ``"0,3"`` or ``"9-17"``.
        strategies: Registered backward strategies to model
            (:func:`einsum_analyze.strategies.strategy_names`; ``None`` or empty:
            forward only).
        strategy_options: Options of the chosen strategies, by strategy name.

    Returns:
        The :class:`Report`.

    Raises:
        EinsumAnalyzeError: Any input the user can fix, with a one-line message.

    Example:
        >>> analyze("ab,bc->ac", [(2, 3), (3, 4)]).plan.flops
        48
    """
    import opt_einsum.paths  # noqa: F401  (imported before the clock starts)

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
    strategy_results: list[StrategyResult] = []
    inference: MemoryProfile | None = None
    gradients: GradientPlan | None = None
    warnings: list[str] = list(plan.warnings)
    chosen = _check_strategies(strategies or (), strategy_options or {})
    operands: tuple[int, ...] = ()  # nothing is differentiated without a strategy
    if chosen:
        if isinstance(grad, str):
            operands = parse_operand_list(grad, eq.num_operands)
        else:
            operands = tuple(sorted(set(int(k) for k in grad)))
            for k in operands:
                if not 0 <= k < eq.num_operands:
                    raise PlanningError(
                        f"operand {k} does not exist; the equation has operands "
                        f"0..{eq.num_operands - 1}"
                    )
        if any(spec.needs_gradient_plans for spec in chosen):
            name_ = optimize.lower() if isinstance(optimize, str) else "auto"
            gradients = plan_gradients(eq, operands, name_, forward=plan, memory_limit=limit)
        for spec in chosen:
            result = build_strategy(
                spec.name, plan, operands, itemsize=itemsize, gradients=gradients,
                options=(strategy_options or {}).get(spec.name),
            )
            strategy_results.append(result)
            warnings.extend(w for w in result.warnings if w not in warnings)
        inference = simulate_memory(
            lower_events(forward_schedule(plan), eq.terms, eq.size_dict),
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
        grad_operands=operands,
        gradients=gradients,
        strategies=tuple(strategy_results),
        inference_memory=inference,
        warnings=tuple(warnings),
        environment=environment(),
    )


def _check_strategies(
    names: Sequence[str], options: Mapping[str, Mapping[str, Any]]
) -> tuple[StrategySpec, ...]:
    """The registered strategies named, each once, in the order given."""
    chosen: dict[str, StrategySpec] = {}
    for name in names:
        spec = get_strategy(name)
        chosen.setdefault(spec.name, spec)
    for name in options:
        if name not in chosen:
            raise PlanningError(
                f"options given for strategy {name!r}, which is not among the chosen: "
                f"{', '.join(chosen) or 'none'}"
            )
    return tuple(chosen.values())
