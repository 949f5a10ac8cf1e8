"""The one entry point the CLI and notebooks share: :func:`analyze`."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ._types import DTYPE_ITEMSIZE
from .equation import parse_equation, shapes_from_sizes
from .errors import BackendUnavailableError, PlanningError, ShapeError
from .lowering import lower_events
from .memory import MemoryProfile, forward_schedule, input_elements, simulate_memory
from .parsing import parse_bytes, parse_operand_list
from .planning import (
    DEFAULT_MAX_SEARCH_S,
    SearchCallback,
    parse_memory_limit,
    plan_contraction,
)
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

__all__ = ["analyze", "execute"]


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
    max_search_s: float | None = DEFAULT_MAX_SEARCH_S,
    on_search: SearchCallback | None = None,
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
        max_search_s: Seconds a path search may take (None: no limit): the forward
            path's, then all the gradient contractions' together. A search still running
            then stops; ``branch-*`` keeps the best path it had found, the others fall
            back to greedy, and the report's warnings say so.
        on_search: Called with a one-line notice before a search that may take long
            (exponential in the operands) starts, e.g. to print it at once.

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
    plan = plan_contraction(eq, optimize, limit, max_search_s=max_search_s,
                            on_search=on_search)
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
            gradients = plan_gradients(eq, operands, name_, forward=plan, memory_limit=limit,
                                       max_search_s=max_search_s, on_search=on_search)
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


def execute(
    report: Report,
    *,
    devices: Sequence[str] | None = None,
    backend: str = "torch",
    repeats: int = 10,
    warmup: int = 3,
    seed: int = 0,
    max_memory: int | str | None = None,
    force: bool = False,
    on_progress: Callable[[str], None] | None = None,
) -> Report:
    """Run the report's strategies and the torch baselines; return the report with runs.

    Args:
        report: From :func:`analyze`, with strategies.
        devices: ``["cpu"]``, ``["cuda:0"]``, ...; None: cpu, plus cuda if present.
        backend: ``"torch"`` or ``"numpy"`` (cpu only, no baselines).
        repeats: Timed blocks per phase.
        warmup: Untimed calls first.
        seed: Seed of the random operands.
        max_memory: Skip runs whose predicted peak exceeds this (bytes, or ``"8GiB"``).
        force: Run on cpu even when the predicted time is far beyond reason.
        on_progress: Called with a label as each run starts.

    Returns:
        A copy of ``report`` with ``runs`` and any new warnings.

    Raises:
        BackendUnavailableError: An unknown or absent device, backend or dtype.
    """
    from .execution import execute_report, resolve_devices

    if backend not in ("torch", "numpy"):
        raise BackendUnavailableError(f"unknown backend {backend!r}; choose torch or numpy")
    if backend == "numpy" and report.dtype == "bfloat16":
        raise BackendUnavailableError("numpy has no bfloat16; use --backend torch")
    if repeats < 1 or warmup < 0:
        raise PlanningError("--repeats must be at least 1 and --warmup at least 0")
    limit = None
    if max_memory is not None:
        try:
            limit = max_memory if isinstance(max_memory, int) else parse_bytes(max_memory)
        except ValueError as err:
            raise PlanningError(f"--max-memory: {err}") from err
    chosen = resolve_devices(devices)
    start = time.perf_counter()
    runs, notes = execute_report(
        report,
        devices=chosen,
        backend="numpy" if backend == "numpy" else "torch",
        repeats=repeats,
        warmup=warmup,
        seed=seed,
        max_memory_bytes=limit,
        force=force,
        on_progress=on_progress,
    )
    environment = dict(report.environment)
    environment.update(_torch_environment(chosen))
    environment["execution_s"] = time.perf_counter() - start
    return replace(report, runs=runs, warnings=report.warnings + notes, environment=environment)


def _torch_environment(devices: Sequence[str]) -> dict[str, Any]:
    import numpy
    import torch

    info: dict[str, Any] = {
        "torch": torch.__version__,
        "numpy": numpy.__version__,
        "cuda_available": torch.cuda.is_available(),
        "torch_threads": torch.get_num_threads(),
        "grad_mode": "no_grad for the executor; enable_grad for baselines",
    }
    names = [torch.cuda.get_device_name(torch.device(d)) for d in devices if d.startswith("cuda")]
    if names:
        info["cuda_devices"] = names
        info["cuda_version"] = torch.version.cuda
    return info
