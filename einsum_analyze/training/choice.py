"""Which plan the drop-in einsum runs: a strategy's model, chosen from the analysis.

:func:`choose_plan` resolves ``strategy="auto"`` to the training-aware search's
recommended plan (:mod:`einsum_analyze.search`), else ``reverse``, and fits a budget.
It returns the strategy's model (schedule, FLOPs, memory), which :mod:`.plans` compiles
for the torch executor and :mod:`.capture` reports. It calls only down, into
:func:`einsum_analyze.analyze` and the strategy registry, and imports no torch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..analysis import analyze
from ..errors import EinsumAnalyzeError
from ..strategies import StrategyResult, get_strategy, strategy_names

__all__ = ["NO_BUDGET", "choose_plan"]

NO_BUDGET = -1
"""The budget argument of the drop-in's ops when the caller gives none."""


def choose_plan(equation: str, shapes: Sequence[Sequence[int]], dtype: str,
                grad: Sequence[int], strategy: str, optimize: str,
                budget: int) -> StrategyResult:
    """Model the strategy to run: ``strategy`` (``auto`` resolved), fitted to ``budget``.

    Raises:
        EinsumAnalyzeError: Bad input, or a budget no plan meets (the message gives the
            smallest reachable peak).
    """
    if strategy == "auto":
        recommended = _recommended(equation, shapes, dtype, grad, optimize, budget)
        if recommended is not None:
            return recommended
        strategy = "reverse"
    first = _model(equation, shapes, dtype, grad, get_strategy(strategy).name, optimize,
                   budget)
    if budget == NO_BUDGET or first.memory.peak_bytes <= budget:
        return first
    tried = [first]
    for name in strategy_names():
        spec = get_strategy(name)
        if name != first.name and spec.lowered:
            tried.append(_model(equation, shapes, dtype, grad, name, optimize, budget))
    fitting = [r for r in tried if r.memory.peak_bytes <= budget]
    if fitting and strategy == "reverse" and first.name == "reverse":
        return min(fitting, key=lambda r: (r.forward_flops + r.backward_flops,
                                           r.memory.peak_bytes))
    best = min(tried, key=lambda r: r.memory.peak_bytes)
    if fitting:
        raise EinsumAnalyzeError(
            f"strategy {first.name!r} peaks at {first.memory.peak_bytes} B, over the budget "
            f"of {budget} B; strategy {fitting[0].name!r} fits (or use strategy='auto')"
        )
    raise EinsumAnalyzeError(
        f"no plan fits the budget of {budget} B: the smallest reachable peak is "
        f"{best.memory.peak_bytes} B (strategy {best.name!r}, inputs counted)"
    )


def _model(equation: str, shapes: Sequence[Sequence[int]], dtype: str, grad: Sequence[int],
           name: str, optimize: str | Sequence[Sequence[int]], budget: int,
           options: Mapping[str, Any] | None = None) -> StrategyResult:
    chosen = {**get_strategy(name).dropin_options, **(options or {})}
    if budget != NO_BUDGET and "budget_bytes" in get_strategy(name).options:
        chosen.setdefault("budget_bytes", budget)
    report = analyze(equation, shapes, optimize=optimize, dtype=dtype, grad=list(grad),
                     strategies=[name], strategy_options={name: chosen} if chosen else None)
    return report.strategies[0]


def _recommended(equation: str, shapes: Sequence[Sequence[int]], dtype: str,
                 grad: Sequence[int], optimize: str, budget: int) -> StrategyResult | None:
    """The training-aware search's recommended plan (docs/method.md section 11).

    The search scores candidate paths with the strategies that run on our executor by
    the training step's FLOPs, and recommends the cheapest within a budget: the caller's
    (``checkpoint`` then competes too), or else torch.einsum's own training peak as the
    ``torch-autograd`` model predicts it, so that the drop-in never holds more than the
    call it replaces. Its result carries the schedule of its own path, which is what runs.

    Raises:
        EinsumAnalyzeError: No plan fits the caller's budget (the message gives the
            smallest reachable training peak and the plan that reaches it).
    """
    bounded = budget != NO_BUDGET
    strategies = [name for name in strategy_names() if get_strategy(name).lowered
                  and (bounded or "budget_bytes" not in get_strategy(name).options)
                  and not get_strategy(name).needs_gradient_plans]
    if bounded:
        cap = budget
    else:
        (torch_model,) = analyze(equation, shapes, dtype=dtype, grad=list(grad),
                                 strategies=["torch-autograd"]).strategies
        cap = torch_model.memory.peak_bytes
    dropin = {name: get_strategy(name).dropin_options for name in strategies
              if get_strategy(name).dropin_options}
    report = analyze(equation, shapes, dtype=dtype, grad=list(grad), optimize=optimize,
                     strategies=strategies, objective="flops", strategy_options=dropin or None,
                     # zero-size operands: nothing to cap
                     budget=cap if cap > 0 else None, fallback=bounded)
    recommended = report.recommended
    if recommended is None:
        return None
    plan = recommended.plan
    if not recommended.fits and bounded:
        raise EinsumAnalyzeError(
            f"no plan fits the budget of {budget} B: the smallest reachable peak is "
            f"{plan.peak_bytes} B (strategy {plan.strategy!r} on the {plan.source} path, "
            "inputs counted)"
        )
    return plan.result  # within the cap, or else the least peak any plan reaches
