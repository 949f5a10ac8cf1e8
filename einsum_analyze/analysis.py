"""The one entry point the CLI and notebooks share: :func:`analyze`."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from ._types import DTYPE_ITEMSIZE, Strategy
from .equation import parse_equation, shapes_from_sizes
from .errors import PlanningError, ShapeError
from .lowering import lower_events
from .memory import MemoryProfile, forward_schedule, input_elements, simulate_memory
from .parsing import parse_operand_list
from .planning import parse_memory_limit, plan_contraction
from .report import Report, environment
from .strategies import (
    LARGE_NETWORK,
    SEARCH_LIMIT,
    STRATEGIES,
    GradientPlan,
    StrategyResult,
    build_strategy,
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
        grad: Operands that need a gradient: ``"all"``, ``"none"``, a list of positions,
            or text such as ``"0,3"`` or ``"9-17"``.
        strategies: Backward strategies to model (``None`` or empty: forward only).

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
    warnings: list[str] = []
    chosen = _check_strategies(strategies or ())
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
        for name in chosen:
            if name == "independent":
                continue
            strategy_results.append(build_strategy(name, plan, operands, itemsize=itemsize))
        if "independent" in chosen:
            name_ = optimize if isinstance(optimize, str) else "auto"
            gradients = plan_gradients(eq, operands, name_, forward=plan)
            if gradients.optimizer != name_:
                reason = (
                    f"the network has over {LARGE_NETWORK} operands"
                    if eq.num_operands > LARGE_NETWORK
                    else f"{name_!r} searches too long to run once per operand above "
                    f"{SEARCH_LIMIT} operands"
                )
                warnings.append(
                    f"the independent strategy follows the forward tree re-rooted at each "
                    f"operand for its {len(operands)} gradient contractions instead of "
                    f"planning each with {name_!r}: {reason}"
                )
            strategy_results.append(
                build_strategy("independent", plan, operands, itemsize=itemsize,
                               gradients=gradients)
            )
        if "torch-autograd" in chosen:
            warnings.append(
                "the torch-autograd model counts the reduced copies torch.einsum keeps for "
                "backward but not the permuted copies it may make before a matrix product"
            )
        order: dict[str, int] = {name: number for number, name in enumerate(chosen)}
        strategy_results.sort(key=lambda result: order[result.name])
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
        gradients=gradients,
        strategies=tuple(strategy_results),
        inference_memory=inference,
        warnings=tuple(warnings),
        environment=environment(),
    )


def _check_strategies(names: Sequence[str]) -> tuple[Strategy, ...]:
    chosen: list[Strategy] = []
    for name in names:
        match = next((s for s in STRATEGIES if s == name), None)
        if match is None:
            raise PlanningError(
                f"unknown strategy {name!r}; choose from: {', '.join(STRATEGIES)}"
            )
        if match not in chosen:
            chosen.append(match)
    return tuple(chosen)
