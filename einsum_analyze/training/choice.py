"""Which plan the drop-in einsum runs: a strategy's model, chosen from the analysis.

:func:`choose_plan` resolves ``strategy="auto"`` to the training-aware search's
recommended plan (:mod:`einsum_analyze.search`), else ``reverse``, and fits a budget.
It returns the strategy's model (schedule, FLOPs, memory), which :mod:`.plans` compiles
for the torch executor and :mod:`.capture` reports. :func:`choose_dropin` adds
torch.einsum's own execution (the ``torch-autograd`` model) as a candidate of ``auto``:
where no plan is predicted to beat it without a higher peak, the drop-in calls
torch.einsum itself, and the choice says why. It calls only down, into
:func:`einsum_analyze.analyze` and the strategy registry, and imports no torch.
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..analysis import analyze
from ..errors import EinsumAnalyzeError
from ..strategies import StrategyResult, get_strategy, strategy_names

__all__ = ["FLOP_MARGIN", "NO_BUDGET", "DropinChoice", "choose_dropin", "choose_plan"]

NO_BUDGET = -1
"""The budget argument of the drop-in's ops when the caller gives none."""


FLOP_MARGIN = 0.9
"""A plan of ours is predicted faster than torch.einsum's own execution when its forward
and backward FLOPs are at most this share of the ``torch-autograd`` model's: on equal work
(a pair einsum, or the same path) torch.einsum's kernels are the same or fewer, and our
call costs a little more on top."""


_TORCH_CHARACTERS = frozenset(string.ascii_letters + ",->. ")
"""The characters torch.einsum reads in an equation."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DropinChoice:
    """What the drop-in runs for one call, and why.

    Attributes:
        result: The model of our best plan (what traced calls run, and eager calls
            where ``runs_torch`` is False).
        runs_torch: Eager calls run torch.einsum itself: no plan of ours is predicted
            to beat it without a higher peak.
        reason: One line saying why, with the figures compared.
    """

    result: StrategyResult
    runs_torch: bool
    reason: str


def choose_dropin(equation: str, shapes: Sequence[Sequence[int]], dtype: str,
                  grad: Sequence[int], strategy: str, optimize: str,
                  budget: int) -> DropinChoice:
    """The plan of :func:`choose_plan`, or torch.einsum's own execution under ``auto``.

    With ``strategy="auto"``, torch.einsum runs unless our plan has at most
    :data:`FLOP_MARGIN` of its FLOPs and no higher a predicted peak, or torch.einsum's
    predicted peak is over ``budget``. A named strategy always runs as asked.

    Example:
        ``ij,jk->ik`` with sizes 2, 3, 4 does the same work either way, so torch.einsum
        runs: ``choose_dropin("ij,jk->ik", [(2, 3), (3, 4)], "float32", [0, 1], "auto",
        "auto", NO_BUDGET).runs_torch`` is True.

    Raises:
        EinsumAnalyzeError: Bad input, or a budget that neither torch.einsum nor any
            plan meets (the message gives the smallest reachable peak).
    """
    if strategy != "auto":
        result = choose_plan(equation, shapes, dtype, grad, strategy, optimize, budget)
        return DropinChoice(result=result, runs_torch=False,
                            reason=f"strategy {result.name!r} asked for")
    if not set(equation) <= _TORCH_CHARACTERS:
        result = choose_plan(equation, shapes, dtype, grad, strategy, optimize, budget)
        return DropinChoice(result=result, runs_torch=False, reason=(
            f"{result.name!r}: torch.einsum reads only the labels a-z and A-Z"))
    (torch_model,) = analyze(equation, shapes, dtype=dtype, grad=list(grad),
                             strategies=["torch-autograd"]).strategies
    torch_peak = torch_model.memory.peak_bytes
    torch_flops = torch_model.forward_flops + torch_model.backward_flops
    if budget != NO_BUDGET and torch_peak > budget:
        result = choose_plan(equation, shapes, dtype, grad, strategy, optimize, budget)
        return DropinChoice(result=result, runs_torch=False, reason=(
            f"torch.einsum's predicted peak {torch_peak} B is over the budget of "
            f"{budget} B; {result.name!r} peaks at {result.memory.peak_bytes} B"))
    try:
        result = choose_plan(equation, shapes, dtype, grad, strategy, optimize, budget)
    except EinsumAnalyzeError:
        if budget == NO_BUDGET:
            raise
        result = choose_plan(equation, shapes, dtype, grad, strategy, optimize, NO_BUDGET)
    flops = result.forward_flops + result.backward_flops
    peak = result.memory.peak_bytes
    figures = (f"{result.name!r} {flops} FLOPs, peak {peak} B; torch.einsum {torch_flops} "
               f"FLOPs, peak {torch_peak} B")
    if peak > torch_peak:
        return DropinChoice(result=result, runs_torch=True,
                            reason=f"torch.einsum: no plan peaks lower ({figures})")
    if flops >= torch_flops or flops > FLOP_MARGIN * torch_flops:
        return DropinChoice(result=result, runs_torch=True,
                            reason=f"torch.einsum: no plan is predicted faster ({figures})")
    return DropinChoice(result=result, runs_torch=False,
                        reason=f"{result.name!r}: predicted faster ({figures})")


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
