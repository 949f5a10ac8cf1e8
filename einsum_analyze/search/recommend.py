"""Score candidate paths with every strategy, keep the Pareto front, recommend one plan.

Every candidate path (:mod:`.candidates`) is re-scored by our own model: each strategy
that runs on our executor (registered with ``lowered``) is built on it with
:func:`~einsum_analyze.strategies.build_strategy`, for the operands that need gradients
only. A strategy registered with a ``budget_bytes`` option (``checkpoint``) is given the
training budget. Objectives:

- ``time`` (the default): the time model's predicted forward + backward seconds on the
  search's device profile (:mod:`einsum_analyze.roofline.time_model`); ties: the lower
  peak. torch.einsum's own execution (the ``torch-autograd`` model on its own path) is a
  candidate: where it fits, a plan is recommended over it only if predicted faster
  without a higher peak. A lower peak is worth some time: a plan whose peak is a share
  ``s`` below the fastest's may be up to ``PEAK_PRICE * s`` slower (half; at most
  :data:`TIME_SLACK`, 15%), or, where it does the same arithmetic (within
  :data:`SAME_WORK`), up to the time model's error (:data:`MODEL_ERROR`); the least
  peak among such plans is recommended.
- ``flops``: training FLOPs (forward + backward + recompute); ties: the lower peak.
- ``memory``: training peak, inputs included; ties: the fewer FLOPs.
- ``balanced``: the product of the two, so halving the peak is worth doubling the FLOPs
  (the choice does not depend on units); ties: the fewer FLOPs.

The recommended plan minimises the objective among the plans that fit the budget; when
none fits, it is the plan of least training peak, and the report says it does not fit.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ..errors import PlanningError
from ..model.deadline import HeldShare, past_deadline, remaining_s, search_deadline
from ..model.equation import Equation
from ..model.memo import remembered, strategy_key
from ..model.planning import DEFAULT_MAX_SEARCH_S, Plan
from ..model.types import LinearPath
from ..roofline import NOMINAL, DeviceProfile, predict_time
from ..strategies import (
    LARGE_NETWORK,
    GradientPlan,
    StrategyResult,
    build_strategy,
    get_strategy,
    plan_gradients,
    strategy_names,
)
from .candidates import candidate_paths
from .records import (
    DEFAULT_OBJECTIVE,
    OBJECTIVES,
    Objective,
    PlanScore,
    Recommendation,
    SearchResult,
)

__all__ = [
    "DEFAULT_PROFILE",
    "MODEL_ERROR",
    "RECOMMENDED_LABEL",
    "SAME_WORK",
    "SAME_WORK_SAVING",
    "PEAK_PRICE",
    "TIME_SLACK",
    "TORCH_SOURCE",
    "check_objective",
    "floor_bytes",
    "objective_key",
    "pareto_front",
    "recommend",
    "score_path",
    "search_plans",
    "sweep_limits",
    "torch_model",
]

DEFAULT_PROFILE: DeviceProfile = NOMINAL["cpu"]
"""The device profile the ``time`` objective predicts on when the caller gives none."""

TORCH_SOURCE = "torch.einsum"
"""The source of the candidate that is torch.einsum's own execution."""

RECOMMENDED_LABEL = "recommended"
"""The name the recommended plan's run carries when it is not one of the report's own."""

TOP_FOR_GRADIENT_PLANS = 1
"""Paths besides the forward path on which strategies that plan every gradient on its own
(``independent``) are scored: the best few by the cheap strategies (each costs one
gradient planning). None above :data:`~einsum_analyze.strategies.LARGE_NETWORK` operands,
where one such planning takes seconds."""


def check_objective(name: str) -> Objective:
    """The objective called ``name`` (the empty name is none of them).

    Raises:
        PlanningError: No such objective.
    """
    for objective in OBJECTIVES:
        if objective == name.strip().lower():
            return objective
    raise PlanningError(f"unknown objective {name!r}; choose one of: {', '.join(OBJECTIVES)}")


def objective_key(objective: Objective) -> Callable[[PlanScore], tuple[float, ...]]:
    """Sort key: the least key is the best plan for ``objective``."""
    if objective == "time":
        return lambda p: (p.predicted_s, p.peak_bytes, p.training_flops)
    if objective == "flops":
        return lambda p: (p.training_flops, p.peak_bytes)
    if objective == "memory":
        return lambda p: (p.peak_bytes, p.training_flops)
    return lambda p: (float(p.training_flops) * float(p.peak_bytes), p.training_flops)


def pareto_front(plans: Iterable[PlanScore],
                 objective: Objective = "flops") -> tuple[PlanScore, ...]:
    """Plans no other plan beats on both training FLOPs and training peak, by FLOPs.

    With the ``time`` objective the first figure is the predicted time instead.

    Example:
        >>> from einsum_analyze import analyze
        >>> r = analyze("ab,bc->ac", [(2, 3), (3, 4)]).strategies[0]
        >>> p = PlanScore(path=((0, 1),), source="x", strategy="reverse", forward_flops=1,
        ...               training_flops=3, peak_bytes=9, retained_bytes=0,
        ...               largest_intermediate_elements=1, result=r)
        >>> from dataclasses import replace
        >>> len(pareto_front([p, replace(p, training_flops=4), replace(p, peak_bytes=8,
        ...                                                          training_flops=5)]))
        2
    """
    front: list[PlanScore] = []
    first: Callable[[PlanScore], float] = (
        (lambda p: p.predicted_s) if objective == "time" else (lambda p: p.training_flops))
    for plan in sorted(plans, key=lambda p: (first(p), p.peak_bytes, p.training_flops)):
        if not front or plan.peak_bytes < front[-1].peak_bytes:
            front.append(plan)
    return tuple(front)


def floor_bytes(equation: Equation, grad: Sequence[int], itemsize: int) -> int:
    """Inputs, upstream gradient and the returned gradients: no plan goes under it."""
    sizes = equation.size_dict

    def elements(term: str) -> int:
        total = 1
        for char in term:
            total *= sizes[char]
        return total

    inputs = sum(elements(t) for t in equation.terms)
    grads = sum(elements(equation.terms[k]) for k in set(grad))
    upstream = elements(equation.output) if grad else 0
    return (inputs + upstream + grads) * itemsize


def score_path(
    plan: Plan,
    grad: Sequence[int],
    strategy: str,
    *,
    itemsize: int,
    source: str,
    budget: int | None = None,
    gradients: GradientPlan | None = None,
    known: StrategyResult | None = None,
    options: Mapping[str, Any] | None = None,
    upstream_copy: bool = False,
    profile: DeviceProfile | None = None,
    dtype: str = "float32",
) -> PlanScore:
    """One strategy on one path, scored by our model (``known``: its result, built).

    ``options``: the strategy's options, besides the budget that a strategy with a
    ``budget_bytes`` option is given. ``profile``: predict its time there (in ``dtype``).
    """
    if known is not None:
        result = known
    else:
        spec = get_strategy(strategy)
        options = dict(options or {})
        if budget is not None and "budget_bytes" in spec.options:
            options["budget_bytes"] = budget
        chosen = options or None

        def build() -> StrategyResult:
            return build_strategy(strategy, plan, grad, itemsize=itemsize, gradients=gradients,
                                  options=chosen, upstream_copy=upstream_copy)

        # A sweep's limits share candidate paths: each is modelled once per analysis.
        result = (build() if gradients is not None else remembered(
            strategy_key(strategy, plan, grad, itemsize=itemsize, options=chosen,
                         own_path=spec.own_path,
                         upstream_copy=upstream_copy), build))
    return PlanScore(
        path=tuple(tuple(s) for s in plan.path),
        source=source,
        strategy=result.name,
        forward_flops=plan.flops,
        training_flops=result.forward_flops + result.backward_flops,
        peak_bytes=result.memory.peak_bytes,
        retained_bytes=result.memory.retained_bytes,
        largest_intermediate_elements=plan.largest_intermediate_elements,
        result=result,
        predicted=None if profile is None else predict_time(
            result.events, result.sizes(plan.equation.size_dict), itemsize, profile, dtype),
    )


def search_strategies() -> tuple[str, ...]:
    """The registered strategies our executor runs: the search's choices.

    Those registered as a ``fallback`` are scored only when nothing else fits the budget,
    and then whether or not the caller named them.
    """
    return tuple(name for name in strategy_names() if get_strategy(name).lowered)


FALLBACK_PATHS = 2
"""Paths on which a ``fallback`` strategy (``sliced``) is scored when no other plan fits
the budget: the forward path and those of the least training peaks, this many in all."""


def _fallbacks(
    names: Sequence[str], scored: Sequence[PlanScore], plans: dict[LinearPath, Plan],
    sources: dict[LinearPath, str], forward_path: LinearPath, grad: Sequence[int],
    itemsize: int, budget: int, options: Mapping[str, Mapping[str, Any]],
    upstream_copy: bool, profile: DeviceProfile | None, dtype: str,
) -> list[PlanScore]:
    """The fallback strategies, scored on the most promising paths (see FALLBACK_PATHS).

    The first is always scored; each other one only while the search's deadline leaves
    more than the last scoring took (a sliced plan's scoring on ``tucker`` took 0.69 s,
    and the next, started 0.29 s before a 1 s deadline, ended 0.37 s past it).
    """
    order = [forward_path] + [p.path for p in sorted(scored, key=lambda p: p.peak_bytes)]
    paths = [p for p in dict.fromkeys(order) if p in plans][:FALLBACK_PATHS]
    found: list[PlanScore] = []
    last_s = 0.0  # the last scoring's seconds: about what the next one takes
    for name in names:
        for path in paths:
            left = remaining_s()
            if found and left is not None and left <= last_s:
                return found  # the forward path's is done: the rest waits for more time
            start = time.perf_counter()
            found.append(score_path(plans[path], grad, name, itemsize=itemsize,
                                    source=sources[path], budget=budget,
                                    options=options.get(name), upstream_copy=upstream_copy,
                                    profile=profile, dtype=dtype))
            last_s = time.perf_counter() - start
    return found


def search_plans(
    forward: Plan,
    grad: Sequence[int],
    *,
    itemsize: int,
    objective: Objective = DEFAULT_OBJECTIVE,
    budget: int | None = None,
    memory_limit: int | None = None,
    optimize: str = "auto",
    time_limit: float = 0.3,
    cotengra: bool | None = False,
    strategies: Sequence[str] | None = None,
    known: Sequence[StrategyResult] = (),
    max_search_s: float | None = DEFAULT_MAX_SEARCH_S,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    upstream_copy: bool = False,
    fallback: bool = True,
    profile: DeviceProfile | None = None,
    dtype: str = "float32",
) -> SearchResult:
    """Search candidate paths and strategies for the training step (see the module).

    Args:
        forward: The report's forward plan (always a candidate).
        grad: Operands that need a gradient.
        itemsize: Bytes per element.
        objective: ``time``, ``flops``, ``memory`` or ``balanced``.
        budget: Training budget in bytes, handed to budget-aware strategies.
        memory_limit: Largest intermediate of every candidate path, in elements.
        optimize: Optimizer of the gradient cores of strategies that plan them.
        time_limit: Seconds for path re-contraction.
        cotengra: Use cotengra's hyper-optimizer (None: when installed).
        strategies: Strategies to score, those our executor runs (``lowered``) among
            them (none such, or None: every one it runs).
        known: Results already built on ``forward`` with the same options (the report's
            strategies): reused, not built again.
        max_search_s: Seconds each candidate path's gradient cores may spend in their
            path searches together (``--max-search-time``; None: no limit).
        options: Options of the strategies, by name (``analyze``'s ``strategy_options``);
            the budget is given to those that take one.
        upstream_copy: The executor's seed copies the upstream gradient (complex dtypes;
            :func:`~einsum_analyze.strategies.build_strategy`).
        fallback: Score the strategies registered as a ``fallback`` when no plan of
            ``strategies`` fits ``budget``, named there or not (False: only if named).
        profile: The device profile every plan's time is predicted on (None:
            :data:`DEFAULT_PROFILE`).
        dtype: The dtype whose rate the prediction uses.
    """
    start = time.perf_counter()
    with search_deadline(max_search_s):
        return _search(forward, grad, itemsize=itemsize, objective=objective, budget=budget,
                       memory_limit=memory_limit, optimize=optimize, time_limit=time_limit,
                       cotengra=cotengra, strategies=strategies, known=known,
                       options=options or {}, upstream_copy=upstream_copy,
                       fallback=fallback, profile=profile or DEFAULT_PROFILE, dtype=dtype,
                       start=start, max_search_s=max_search_s)


FIRST_SHARE = 0.6
"""Share of the search time the candidate paths and their scores may take when a budget
is given: the sliced fallback has the rest."""


def sweep_limits(plan: Plan) -> tuple[int, ...]:
    """Element limits halving from the largest intermediate of ``plan`` down to one."""
    limits = []
    limit = plan.largest_intermediate_elements // 2
    while limit >= 1:
        limits.append(limit)
        limit //= 2
    return tuple(limits)


def _search(
    forward: Plan, grad: Sequence[int], *, itemsize: int, objective: Objective,
    budget: int | None, memory_limit: int | None, optimize: str, time_limit: float,
    cotengra: bool | None, strategies: Sequence[str] | None,
    known: Sequence[StrategyResult], options: Mapping[str, Mapping[str, Any]],
    upstream_copy: bool, fallback: bool, profile: DeviceProfile, dtype: str, start: float,
    max_search_s: float | None,
) -> SearchResult:
    """The body of :func:`search_plans`, under its deadline."""
    given_options = options
    if dtype not in profile.flops_per_s:  # a calibration is of one dtype
        profile = DEFAULT_PROFILE
    equation = forward.equation
    names = tuple(n for n in strategies or () if get_strategy(n).lowered) \
        or search_strategies()
    # A fallback strategy (slicing) is there for budgets nothing else meets: it is
    # scored then, whether or not the caller named it among the strategies.
    fallback_names = [n for n in (strategy_names() if fallback else names)
                      if get_strategy(n).lowered and get_strategy(n).fallback]
    names = tuple(n for n in names if n not in fallback_names)
    # Strategies registered as ``searched`` are scored whether or not they were named.
    names += tuple(n for n in search_strategies()
                   if get_strategy(n).searched and n not in names and n not in fallback_names)
    tighter: tuple[int, ...] = ()
    sweep: tuple[int, ...] = ()
    if objective != "flops" or budget is not None:
        sweep = sweep_limits(forward)
        largest = max(
            math.prod([equation.size_dict[c] for c in term])
            for term in (*equation.terms, equation.output)
        )
        tighter = (largest, 8 * largest)
    # With a budget that may need slicing, the paths and their scores leave the rest of
    # the time to the sliced fallback: slicing comes last, never not at all. Where a
    # plan on the first path fits already, the fallback will not run: the other paths
    # have the whole time.
    first = (FIRST_SHARE * max_search_s if max_search_s is not None and budget is not None
             and fallback_names and grad else None)
    with search_deadline(first):
        paths = candidate_paths(equation, grad, forward=forward, memory_limit=memory_limit,
                                time_limit=time_limit, cotengra=cotengra, tighter_limits=tighter,
                                sweep_limits=sweep)
        plans = {path: Plan.from_path(equation, path, optimizer=source) for source, path in paths}
        sources = {path: source for source, path in paths}
        cheap = [n for n in names if not get_strategy(n).needs_gradient_plans]
        costly = [n for n in names if get_strategy(n).needs_gradient_plans]
        forward_path = tuple(tuple(step) for step in forward.path)
        reuse = {r.name: r for r in known}
        scored: list[PlanScore] = []
        # Every strategy on the first path (the report's), timed; then each strategy on
        # the other paths, the quickest to score first: under the deadline the search
        # goes wide on cheap strategies before deep on costly ones (on tn18-b65536-bond64
        # reverse scores in 12 ms a path, checkpoint's keep-set search in 1.2 s).
        took: dict[str, float] = {}
        for rank, (path, plan) in enumerate(plans.items()):
            for name in cheap if rank == 0 else ():
                began = time.perf_counter()
                scored.append(score_path(plan, grad, name, itemsize=itemsize,
                                         source=sources[path], budget=budget,
                                         known=reuse.get(name) if path == forward_path else None,
                                         options=given_options.get(name),
                                         upstream_copy=upstream_copy,
                                         profile=profile, dtype=dtype))
                took[name] = time.perf_counter() - began
    # The fallback's share is held back only while no plan fits: once one does (on the
    # first path or any later one), slicing will not run and the paths have all the time.
    reserve = HeldShare(None if first is None or any(p.fits(budget) for p in scored)
                        else start + first)
    # Each strategy starts new paths for at most its share of the time left (what
    # one leaves goes to those after it): a strategy whose cost grows on the later
    # paths (checkpoint's keep-set search without a budget: 1 ms on tn18-b512's
    # first path, 0.1-0.5 s on the others) leaves the rest their paths too.
    ordered = sorted(cheap, key=lambda n: took.get(n, 0.0))
    for turn, name in enumerate(ordered):
        left = reserve.remaining_s()
        share_end = (None if left is None
                     else time.perf_counter() + left / (len(ordered) - turn))
        for path, plan in list(plans.items())[1:]:
            if reserve.over() or (share_end is not None
                                  and time.perf_counter() >= share_end):
                break  # the candidates come in order: the cheapest sources first
            with search_deadline(reserve.held_s()):
                scored.append(score_path(plan, grad, name, itemsize=itemsize,
                                         source=sources[path], budget=budget,
                                         options=given_options.get(name),
                                         upstream_copy=upstream_copy,
                                         profile=profile, dtype=dtype))
            if scored[-1].fits(budget) and reserve.lapse():
                left = reserve.remaining_s()  # the reserve lapsed: a new share
                share_end = (None if left is None
                             else time.perf_counter() + left / (len(ordered) - turn))
    # Back in the candidates' order, path by path: equal scores are broken the same
    # way whatever the measured scoring times ordered (ties go to the first).
    path_rank = {path: k for k, path in enumerate(plans)}
    order = {name: k for k, name in enumerate(cheap)}
    scored.sort(key=lambda p: (path_rank.get(p.path, len(path_rank)), order.get(p.strategy, 0)))
    for name in costly:
        # The report's path is a candidate unless a pairwise version replaced it.
        if name in reuse and forward_path in plans:
            scored.append(score_path(forward, grad, name, itemsize=itemsize,
                                     source=sources[forward_path], known=reuse[name],
                                      profile=profile, dtype=dtype))
    extra = TOP_FOR_GRADIENT_PLANS if equation.num_operands <= LARGE_NETWORK else 0
    if costly and grad and extra and not reserve.over():
        key = objective_key(objective)
        ranked = sorted(scored, key=key) if scored else []
        chosen: list[LinearPath] = []
        for plan_score in [*ranked, *pareto_front(scored)]:
            if plan_score.path not in chosen:
                chosen.append(plan_score.path)
        if not chosen:
            chosen = list(plans)
        done = all(name in reuse for name in costly)
        for path in [p for p in chosen if p != forward_path or not done][:extra]:
            gradients = plan_gradients(equation, grad, optimize, forward=plans[path],
                                       memory_limit=memory_limit,
                                       max_search_s=reserve.remaining_s())
            for name in costly:
                with search_deadline(reserve.held_s()):
                    scored.append(score_path(plans[path], grad, name, itemsize=itemsize,
                                             source=sources[path], budget=budget,
                                             gradients=gradients,
                                             options=given_options.get(name),
                                             upstream_copy=upstream_copy,
                                             profile=profile, dtype=dtype))
    if fallback_names and budget is not None and grad and not past_deadline() and \
            not any(p.fits(budget) for p in scored):
        scored.extend(_fallbacks(fallback_names, scored, plans, sources, forward_path, grad,
                                 itemsize, budget, given_options, upstream_copy,
                                 profile, dtype))
    if not scored:
        raise PlanningError("the search found no plan to score")
    if objective == "time" and grad:
        scored.append(_torch_candidate(forward, grad, itemsize, known, profile, dtype))
    key = objective_key(objective)
    return SearchResult(
        objective=objective,
        candidates=len(plans),
        sources=tuple(dict.fromkeys(sources.values())),
        pareto=pareto_front(scored, objective),
        forward_optimal=min(scored, key=lambda p: (p.forward_flops, key(p))),
        training_optimal=min(scored, key=key),
        smallest_peak=min(scored, key=lambda p: (p.peak_bytes, p.training_flops)),
        search_s=time.perf_counter() - start,
    )


def torch_model(forward: Plan, grad: Sequence[int], itemsize: int,
                known: Sequence[StrategyResult] = ()) -> StrategyResult:
    """The ``torch-autograd`` model of ``forward``'s equation: from ``known``, or built."""
    model = next((r for r in known if r.name == "torch-autograd"), None)
    if model is not None:
        return model
    built: StrategyResult = remembered(
        strategy_key("torch-autograd", forward, grad, itemsize=itemsize,
                     own_path=get_strategy("torch-autograd").own_path),
        lambda: build_strategy("torch-autograd", forward, grad, itemsize=itemsize))
    return built


def _torch_candidate(forward: Plan, grad: Sequence[int], itemsize: int,
                     known: Sequence[StrategyResult], profile: DeviceProfile,
                     dtype: str) -> PlanScore:
    """torch.einsum's own execution (the ``torch-autograd`` model) as a scored plan."""
    model = torch_model(forward, grad, itemsize, known)
    return score_path(forward, grad, "torch-autograd", itemsize=itemsize, source=TORCH_SOURCE,
                      known=model, profile=profile, dtype=dtype)


TIME_SLACK = 0.15
"""With the ``time`` objective, the most a plan may be predicted slower than the fastest
that fits and still be recommended for a lower peak (see :data:`PEAK_PRICE`)."""

PEAK_PRICE = 0.5
"""Time a lower peak is worth, relatively: a plan whose peak is a share ``s`` below the
fastest plan's may be up to ``PEAK_PRICE * s`` slower (at most :data:`TIME_SLACK`):
27% less peak for 11% more time is taken, 1% less for 5% more is not."""


SAME_WORK = 0.01
"""Training FLOPs within this share of the fastest plan's: the same arithmetic (a plan
that remakes outer products in backward adds about 0.1% on mps-layer and
cp-reconstruction), so their predicted times differ only by kernel launches and host
costs, which the time model knows least well (see :data:`MODEL_ERROR`)."""

MODEL_ERROR = 1.33
"""The time model's stated accuracy, predicted over measured (docs/roofline.md: within
[0.75, 1.33] on the H200): a plan that does the same work as the fastest
(:data:`SAME_WORK`) and peaks lower is recommended while predicted at most this many
times the fastest's time. On the H200, against reverse mode, recompute was predicted
1.29x and measured 1.12x on cp-reconstruction, predicted 1.13x and measured 0.79x on
mps-layer (docs/budgets.md)."""


SAME_WORK_SAVING = 0.05
"""The least relative peak saving for which :data:`MODEL_ERROR` applies: 5%, a saving
that shows beside the rest of a model's tensors (16% on cp-reconstruction, 27% on
mps-layer); below it the sliding price (:data:`PEAK_PRICE`) decides."""


def _least_peak_nearly_as_fast(fitting: Sequence[PlanScore], fastest: PlanScore,
                               torch_plan: PlanScore | None) -> PlanScore:
    """The plan of least peak among those whose lower peak pays for their extra time.

    A plan qualifies when its predicted time is within ``PEAK_PRICE`` times its relative
    peak saving over ``fastest``, and :data:`TIME_SLACK`, of ``fastest``'s, or, doing the
    same work (:data:`SAME_WORK`) at a lower peak, within :data:`MODEL_ERROR` of it;
    never when it is slower than torch.einsum's own execution where that fits (a plan
    is recommended over it only where it is predicted no slower).
    """
    def worth_it(plan: PlanScore) -> bool:
        saving = 1 - plan.peak_bytes / max(fastest.peak_bytes, 1)
        same_work = (saving >= SAME_WORK_SAVING and plan.training_flops
                     <= fastest.training_flops * (1 + SAME_WORK))
        bound = fastest.predicted_s * (MODEL_ERROR if same_work else
                                       1 + min(TIME_SLACK, PEAK_PRICE * saving))
        if torch_plan is not None:
            bound = min(bound, torch_plan.predicted_s)
        return plan.predicted_s <= bound

    close = [p for p in fitting if p is fastest or worth_it(p)]
    return min(close, key=lambda p: (p.peak_bytes, p.predicted_s, p.training_flops))


def recommend(result: SearchResult, budget: int | None) -> Recommendation:
    """The plan minimising the objective within ``budget`` (see the module).

    Each objective grows with both figures, so the best plan within a budget on the
    training peak is on the Pareto front: the front is all that is searched. Where
    torch.einsum's own execution is on the front and fits, only the plans that peak no
    higher than it compete with it. With the ``time`` objective, a plan slower than the
    fastest by at most :data:`PEAK_PRICE` times its relative peak saving (at most
    :data:`TIME_SLACK`, and no slower than torch.einsum's own where that fits) is as
    good: the least peak among those is recommended, so a plan that recomputes a cheap
    intermediate wins for a few percent of time.
    """
    key = objective_key(result.objective)
    fitting = [p for p in result.pareto if p.fits(budget)]
    torch_plan = next((p for p in fitting if p.source == TORCH_SOURCE), None)
    if torch_plan is not None:
        fitting = [p for p in fitting if p.peak_bytes <= torch_plan.peak_bytes]
    if fitting:
        plan = min(fitting, key=key)
        if result.objective == "time":
            plan = _least_peak_nearly_as_fast(fitting, plan, torch_plan)
        return Recommendation(plan=plan, objective=result.objective, budget_bytes=budget,
                              fits=True, label=RECOMMENDED_LABEL)
    return Recommendation(plan=result.smallest_peak, objective=result.objective,
                          budget_bytes=budget, fits=False, label=RECOMMENDED_LABEL)
