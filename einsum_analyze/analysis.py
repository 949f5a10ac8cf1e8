"""The one entry point the CLI and notebooks share: :func:`analyze`, one equation or a batch.

:func:`analyze` models one equation; :func:`run_cases` analyses the cases of a cases file
(:mod:`einsum_analyze.report.cases` reads them) and checks each one's budgets. The
analysis imports no torch, click or rich.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from .errors import BackendUnavailableError, EinsumAnalyzeError, PlanningError, ShapeError
from .model.equation import parse_equation, shapes_from_sizes
from .model.lowering import lower_events
from .model.memo import paused_collection, remembered, remembered_paths, strategy_key
from .model.memory import MemoryProfile, forward_schedule, input_elements, simulate_memory
from .model.parsing import parse_bytes, parse_operand_list
from .model.planning import (
    DEFAULT_MAX_SEARCH_S,
    Plan,
    SearchCallback,
    parse_memory_limit,
    plan_contraction,
)
from .model.types import DTYPE_ITEMSIZE
from .model.units import format_exact_bytes
from .report.budgets import apply_budgets
from .report.cases import BatchReport, Case, CaseEntry, CaseOutcome
from .report.report import Report, environment
from .roofline import DeviceProfile
from .search import (
    DEFAULT_OBJECTIVE,
    BudgetSummary,
    LimitRow,
    Objective,
    Recommendation,
    SearchResult,
    check_objective,
    cotengra_available,
    floor_bytes,
    recommend,
    search_plans,
    torch_model,
)
from .strategies import (
    STRATEGIES,
    GradientPlan,
    StrategyResult,
    StrategySpec,
    build_strategy,
    default_strategy_names,
    get_strategy,
    left_out_note,
    plan_gradients,
)

__all__ = ["MIN_SEARCH_TIME", "analyze", "analyze_case", "run_cases"]

MIN_SEARCH_TIME = 0.1
"""Seconds of path re-contraction each limit of a sweep gets at least."""


def analyze(
    equation: str,
    shapes: Sequence[Sequence[int]] | None = None,
    *,
    sizes: Mapping[str, int] | None = None,
    optimize: str | Sequence[Sequence[int]] = "auto",
    memory_limit: int | str | Sequence[int | str | None] | None = None,
    dtype: str = "float32",
    grad: str | Sequence[int] = "all",
    strategies: Sequence[str] | None = STRATEGIES,
    strategy_options: Mapping[str, Mapping[str, Any]] | None = None,
    budget: int | str | None = None,
    objective: str | None = None,
    cotengra: bool | None = False,
    search_time: float = 0.3,
    max_search_s: float | None = DEFAULT_MAX_SEARCH_S,
    on_search: SearchCallback | None = None,
    fallback: bool = True,
    profile: DeviceProfile | None = None,
    on_analysed: Callable[[Report], None] | None = None,
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
            say that no path meets it. A list (or text with commas, ``"none,1e6"``)
            sweeps the limits: the report is that of the first, and its
            ``memory_limits`` holds one row per limit, each with its best plan.
        dtype: Element type for byte figures.
        grad: Operands that need a gradient: ``"all"``, ``"none"``, a list of positions,
            or text such as ``"0,3"`` or ``"9-17"``.
        strategies: Registered backward strategies to model
            (:func:`einsum_analyze.strategies.strategy_names`; ``None`` or empty:
            forward only). The default, ``STRATEGIES`` itself, is the defaults for the
            equation's size: ``independent`` is left out above 200 operands, and a
            warning says so (name it to model it at any size).
        strategy_options: Options of the chosen strategies, by strategy name.
        budget: Training budget: the training peak, inputs included, in bytes (``int``
            or text such as ``"40GiB"``). Each strategy says whether it fits; a strategy
            with a ``budget_bytes`` option is given it; the search recommends a plan
            within it, or the plan of least peak when none fits.
        objective: ``"time"``, ``"flops"``, ``"memory"`` or ``"balanced"``: search
            candidate paths and strategies for the training step
            (:mod:`einsum_analyze.search`) and recommend one. None: search only with a
            budget or a limit sweep (then ``"time"``).
        cotengra: Add cotengra's hyper-optimizer to the candidates (None: when installed).
        search_time: Seconds the search may spend re-contracting paths, shared by the
            limits of a sweep (at least :data:`MIN_SEARCH_TIME` each).
        max_search_s: Seconds a path search may take (None: no limit): the forward
            path's, then all the gradient contractions' together. A search still running
            then stops; ``branch-*`` keeps the best path it had found, the others fall
            back to greedy, and the report's warnings say so. Each limit of a sweep,
            and each path the training search plans gradient contractions for, has its own.
        on_search: Called with a one-line notice before a search that may take long
            (exponential in the operands) starts, e.g. to print it at once.
        fallback: When no plan of ``strategies`` fits the budget, the search also scores
            the strategies registered as a fallback (``sliced``), named or not.
        profile: The device profile the search predicts every plan's time on (None: the
            nominal ``cpu`` profile).
        on_analysed: Called once, before the training search starts, with the report
            of the (first) limit so far: its forward path, gradients and strategies.

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
    if cotengra and not cotengra_available():
        raise BackendUnavailableError(
            "--cotengra needs the cotengra extra: pip install 'einsum-analyze[cotengra]'"
        )
    if max_search_s is not None and not max_search_s > 0:
        raise PlanningError(f"--max-search-time {max_search_s:g} s: the search needs a time "
                            "above 0 s, such as 2 or 500ms")
    limits = _limit_list(memory_limit)
    budget_bytes = _parse_budget(budget)
    searching = objective is not None or budget_bytes is not None or len(limits) > 1
    chosen_objective = (check_objective(DEFAULT_OBJECTIVE if objective is None else objective)
                        if searching else None)
    options = _budget_options(strategies or (), strategy_options or {}, budget_bytes)
    common: dict[str, Any] = dict(
        sizes=sizes, optimize=optimize, dtype=dtype, grad=grad, strategies=strategies,
        strategy_options=options, budget_bytes=budget_bytes, objective=chosen_objective,
        cotengra=cotengra, search_time=max(search_time / len(limits), MIN_SEARCH_TIME),
        max_search_s=max_search_s, on_search=on_search, fallback=fallback, profile=profile,
    )
    # The limits and the search share opt_einsum's paths; the collector waits (memo.py).
    with remembered_paths(), paused_collection():
        report = _analyze_one(equation, shapes, memory_limit=limits[0],
                              on_analysed=on_analysed, **common)
        if len(limits) == 1:
            return report
        rows = [_limit_row(limits[0], report)]
        for limit in limits[1:]:
            rows.append(_limit_row(limit, _analyze_one(equation, shapes, memory_limit=limit,
                                                       **common)))
    return replace(report, memory_limits=tuple(rows),
                   analysis_s=time.perf_counter() - start)


def _analyze_one(
    equation: str,
    shapes: Sequence[Sequence[int]] | None,
    *,
    sizes: Mapping[str, int] | None,
    optimize: str | Sequence[Sequence[int]],
    memory_limit: int | str | None,
    dtype: str,
    grad: str | Sequence[int],
    strategies: Sequence[str] | None,
    strategy_options: Mapping[str, Mapping[str, Any]],
    budget_bytes: int | None,
    objective: Objective | None,
    cotengra: bool | None,
    search_time: float,
    max_search_s: float | None,
    on_search: SearchCallback | None,
    fallback: bool,
    profile: DeviceProfile | None,
    on_analysed: Callable[[Report], None] | None = None,
) -> Report:
    """One analysis under one memory limit (the body of :func:`analyze`)."""
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
    # The forward memory and the inference lowering replay the same events.
    forward_events = forward_schedule(plan)
    operand_elements = input_elements(plan)
    forward = simulate_memory(
        forward_events,
        input_elements=operand_elements,
        output_elements=plan.steps[-1].output_elements,
        itemsize=itemsize,
    )
    strategy_results: list[StrategyResult] = []
    inference: MemoryProfile | None = None
    gradients: GradientPlan | None = None
    warnings: list[str] = list(plan.warnings)
    if strategies is STRATEGIES:  # not named: the defaults for this size
        strategies = default_strategy_names(eq.num_operands)
        note = left_out_note(eq.num_operands)
        if note is not None:
            warnings.append(note)
    chosen = _check_strategies(strategies or (), strategy_options or {})
    operands: tuple[int, ...] = ()  # nothing is differentiated without a strategy
    if chosen or objective is not None:
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
    if chosen:
        name_ = optimize.lower() if isinstance(optimize, str) else "auto"
        if any(spec.needs_gradient_plans for spec in chosen):
            gradients = remembered(
                ("gradients", plan.optimizer, plan.path, operands, name_, limit),
                lambda: plan_gradients(eq, operands, name_, forward=plan, memory_limit=limit,
                                       max_search_s=max_search_s, on_search=on_search))
        copy = dtype.startswith("complex")
        for spec in chosen:
            options = (strategy_options or {}).get(spec.name)

            def build(name: str = spec.name, given: Any = options) -> StrategyResult:
                return build_strategy(name, plan, operands, itemsize=itemsize,
                                      gradients=gradients, options=given, upstream_copy=copy)

            # A sweep's limits share what they cannot change (the path, or torch's own).
            result = remembered(
                strategy_key(spec.name, plan, operands, itemsize=itemsize, options=options,
                             upstream_copy=copy, own_path=spec.own_path,
                             gradients=(name_, limit) if spec.needs_gradient_plans else None),
                build)
            strategy_results.append(result)
            warnings.extend(w for w in result.warnings if w not in warnings)
        inference = simulate_memory(
            lower_events(forward_events, eq.terms, eq.size_dict),
            input_elements=operand_elements,
            output_elements=plan.steps[-1].output_elements,
            itemsize=itemsize,
        )
    report = Report(
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
    if on_analysed is not None:
        on_analysed(report)  # before the search: the tables so far, e.g. to print them
    found, recommended, summary = _search(
        plan, operands, itemsize=itemsize, upstream_copy=dtype.startswith("complex"),
        objective=objective, budget_bytes=budget_bytes,
        memory_limit=limit, optimize=optimize, cotengra=cotengra, search_time=search_time,
        strategies=strategy_results, max_search_s=max_search_s,
        strategy_options=strategy_options, fallback=fallback, profile=profile, dtype=dtype,
    )
    if recommended is not None and not recommended.fits:
        warnings.append(_no_fit_warning(recommended, summary))
    return replace(report, analysis_s=time.perf_counter() - start, warnings=tuple(warnings),
                   search=found, recommended=recommended, budget=summary)


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


def _limit_list(value: int | str | Sequence[int | str | None] | None) -> list[int | str | None]:
    """The memory limits to analyse: one, or a sweep (``"none,1e6,max_input"``)."""
    if value is None or isinstance(value, int):
        return [value]
    items: Sequence[int | str | None]
    if isinstance(value, str):
        items = value.split(",") if "," in value else [value]
    else:
        items = value
    if not items:
        raise PlanningError("memory limit list is empty")
    limits: list[int | str | None] = []
    for item in items:
        if isinstance(item, str):
            item = item.strip()
            if not item:
                raise PlanningError(f"memory limit list {value!r} has an empty item")
            if item.lower() == "none":
                item = None
        limits.append(item)
    return limits


def _limit_text(limit: int | str | None) -> str:
    return "none" if limit is None else str(limit)


def _parse_budget(budget: int | str | None) -> int | None:
    """The training budget in bytes; a size above 0, or an input error."""
    if budget is None:
        return None
    if isinstance(budget, bool):
        raise PlanningError(f"budget {budget!r} is not a byte size such as 40GiB")
    if isinstance(budget, int):
        value = budget
    else:
        try:
            value = parse_bytes(str(budget))
        except ValueError as err:
            raise PlanningError(f"budget: {err}") from err
    if value < 1:
        raise PlanningError(f"budget {budget!r} must be a size above 0 B, such as 40GiB")
    return value


def _budget_options(
    names: Sequence[str], options: Mapping[str, Mapping[str, Any]], budget: int | None
) -> dict[str, Mapping[str, Any]]:
    """Strategy options with the budget given to every strategy that takes one."""
    merged = {name: dict(value) for name, value in options.items()}
    if budget is None:
        return dict(merged)
    for name in names:
        spec = get_strategy(name)
        if "budget_bytes" in spec.options:
            merged.setdefault(spec.name, {}).setdefault("budget_bytes", budget)
    return dict(merged)


def _search(
    plan: Plan,
    operands: tuple[int, ...],
    *,
    itemsize: int,
    upstream_copy: bool,
    objective: Objective | None,
    budget_bytes: int | None,
    memory_limit: int | None,
    optimize: str | Sequence[Sequence[int]],
    cotengra: bool | None,
    search_time: float,
    strategies: Sequence[StrategyResult],
    max_search_s: float | None,
    strategy_options: Mapping[str, Mapping[str, Any]] | None = None,
    fallback: bool = True,
    profile: DeviceProfile | None = None,
    dtype: str = "float32",
) -> tuple[SearchResult | None, Recommendation | None, BudgetSummary | None]:
    """The search, its recommendation and the budget's summary (each None if not asked)."""
    found = recommended = None
    if objective is not None:
        name = optimize.lower() if isinstance(optimize, str) else "auto"
        found = search_plans(plan, operands, itemsize=itemsize, objective=objective,
                             budget=budget_bytes, memory_limit=memory_limit, optimize=name,
                             time_limit=search_time, cotengra=cotengra,
                             strategies=[s.name for s in strategies
                                         if get_strategy(s.name).lowered],
                             known=strategies, max_search_s=max_search_s,
                             options=strategy_options, upstream_copy=upstream_copy,
                             fallback=fallback, profile=profile, dtype=dtype)
        recommended = recommend(found, budget_bytes)
        # No budget: the cheapest plan that holds no more than torch.einsum itself
        # would (the torch-autograd model's training peak), where the front has one.
        model = torch_model(plan, operands, itemsize, strategies)
        capped = recommend(found, model.memory.peak_bytes)
        free = replace(capped, budget_bytes=None) if capped.fits else recommend(found, None)
        if budget_bytes is None:
            recommended = free
        else:
            recommended = replace(recommended, unconstrained=free.plan)
    summary = None
    if budget_bytes is not None:
        fits = tuple((s.name, s.memory.peak_bytes, s.memory.peak_bytes <= budget_bytes)
                     for s in strategies)
        smallest = found.smallest_peak.peak_bytes if found is not None else None
        summary = BudgetSummary(
            budget_bytes=budget_bytes,
            floor_bytes=floor_bytes(plan.equation, operands, itemsize),
            strategies=fits,
            smallest_peak_bytes=smallest,
            fits=recommended.fits if recommended is not None else any(f for *_, f in fits),
        )
    return found, recommended, summary


def _no_fit_warning(recommended: Recommendation, summary: BudgetSummary | None) -> str:
    plan = recommended.plan
    assert recommended.budget_bytes is not None  # no fit means a budget was set
    floor = ""
    if summary is not None and summary.budget_bytes < summary.floor_bytes:
        floor = (f"; the budget is below the floor of "
                 f"{format_exact_bytes(summary.floor_bytes)}, the inputs, upstream "
                 "gradient and returned gradients")
    return (
        f"no plan fits the training budget of {format_exact_bytes(recommended.budget_bytes)}: "
        f"the smallest reachable training peak is {format_exact_bytes(plan.peak_bytes)}, "
        f"with {plan.strategy} on the {plan.source} path {[list(p) for p in plan.path]}"
        f"{floor}"
    )


def _limit_row(limit: int | str | None, report: Report) -> LimitRow:
    """One row of a limit sweep from the analysis under that limit."""
    plan = report.plan.as_planned  # the path's figures as opt_einsum gives them
    inference = report.inference_memory or report.forward_memory
    return LimitRow(
        limit=_limit_text(limit),
        limit_elements=report.memory_limit_elements,
        optimizer=plan.optimizer,
        path=plan.path,
        forward_flops=report.plan.user_flops,
        largest_intermediate_elements=plan.largest_intermediate_elements,
        inference_peak_bytes=inference.peak_bytes,
        strategies=report.strategies,
        best=report.recommended.plan if report.recommended is not None else None,
        fits=report.recommended.fits if report.recommended is not None else None,
        warnings=report.warnings,
    )


def run_cases(
    entries: Sequence[CaseEntry],
    *,
    runner: Callable[[Case], Report] | None = None,
) -> BatchReport:
    """Analyse every runnable case and check its budgets; keep the errors as entries.

    Args:
        entries: From :func:`~einsum_analyze.report.cases.parse_cases`.
        runner: Turns a case into a report; by default :func:`analyze_case`, which
            analyses with the case's options (analysis only). Budgets are applied to what it
            returns, so a runner that adds ``runs`` gets ``max-time`` checked too.

    Returns:
        The :class:`BatchReport`, in entry order.
    """
    run = runner or analyze_case
    outcomes: list[CaseOutcome] = []
    for entry in entries:
        if entry.case is None:
            outcomes.append(CaseOutcome(name=entry.name, error=entry.error))
            continue
        try:
            report = apply_budgets(run(entry.case), entry.case.options.budgets)
        except EinsumAnalyzeError as err:
            outcomes.append(CaseOutcome(name=entry.name, error=str(err)))
            continue
        outcomes.append(CaseOutcome(name=entry.name, report=report))
    return BatchReport(cases=tuple(outcomes))


def analyze_case(case: Case) -> Report:
    """Analyse one case with its options (no execution); budgets are not applied here."""
    options = case.options
    return analyze(
        case.equation,
        case.shapes,
        sizes=case.sizes,
        optimize=options.optimize,
        memory_limit=options.memory_limit,
        dtype=options.dtype,
        grad=options.grad,
        strategies=options.strategies,
        budget=options.budget,
        objective=options.objective,
        max_search_s=options.max_search_s,
    )
