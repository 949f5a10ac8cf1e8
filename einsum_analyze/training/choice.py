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

import contextvars
import string
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from ..analysis import analyze
from ..errors import EinsumAnalyzeError
from ..model.deadline import remaining_s, search_deadline
from ..model.types import DTYPE_ITEMSIZE
from ..model.units import format_exact_bytes, format_seconds
from ..roofline import DeviceProfile, interpolate, predict_time
from ..search import DEFAULT_PROFILE, TORCH_SOURCE, objective_key
from ..strategies import StrategyResult, get_strategy, strategy_names

__all__ = ["DEFAULT_PLAN_S", "NO_BUDGET", "TIME_MARGIN", "DropinChoice", "call_profile",
           "check_plan_s", "choose_dropin", "choose_plan", "node_s", "planning_time",
           "predicted_s"]

DEFAULT_PLAN_S = 0.5
"""Seconds a first call's planning may take (``einsum(..., max_plan_s=)``): the analyses
of one call share them, their path searches and the training search stop then, and the
best plan found so far (at worst ``reverse`` on the forward path) is taken."""

_PLAN_S: contextvars.ContextVar[float] = contextvars.ContextVar(
    "einsum_analyze_plan_s", default=DEFAULT_PLAN_S)


@contextmanager
def planning_time(seconds: float | None) -> Iterator[None]:
    """Plans chosen within the block take at most ``seconds`` (None: the default)."""
    token = _PLAN_S.set(DEFAULT_PLAN_S if seconds is None else seconds)
    try:
        yield
    finally:
        _PLAN_S.reset(token)


def check_plan_s(value: Any) -> None:
    """Check ``max_plan_s``: None, or seconds above 0.

    Raises:
        DropinValueError: Anything else, in one line.
    """
    import math

    from ..errors import DropinValueError

    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not math.isfinite(value) or value <= 0:
        raise DropinValueError(f"einsum(): max_plan_s={value!r} is not a time; give seconds "
                               "above 0, such as 0.5")


def _left_s() -> float:
    """The planning time left, for an analysis's ``max_search_s`` (above 0 s)."""
    left = remaining_s()
    return max(left if left is not None else _PLAN_S.get(), 1e-3)

NO_BUDGET = -1
"""The budget argument of the drop-in's ops when the caller gives none."""


TIME_MARGIN = 0.9
"""A plan of ours is predicted faster than torch.einsum's own execution when its predicted
forward and backward seconds (the time model, :func:`predicted_s`) are at most this share
of the ``torch-autograd`` model's: on equal work (a pair einsum, or the same path)
torch.einsum's kernels are the same or fewer, and our call costs a little more on top."""


def node_s(profile: DeviceProfile) -> float:
    """The host's seconds of the drop-in's own autograd node around a plan of ours.

    The drop-in runs a plan as one node: its call under autograd costs what
    torch.einsum's call of two operands costs beyond its kernels and one gradient node
    (the profile's host costs, :mod:`einsum_analyze.roofline.host`), and the backward
    call's engine as torch.einsum's does. Our executor's steps come on top.
    """
    host = profile.host
    call = interpolate(host.torch_forward, 2) if host.torch_forward else 0.0
    return call + host.backward_call_s(1)  # the engine's call with one node, as torch's


def predicted_s(result: StrategyResult, size_dict: Mapping[str, int], dtype: str,
                profile: DeviceProfile = DEFAULT_PROFILE) -> float:
    """The time model's forward + backward seconds of ``result`` on ``profile``.

    A plan of ours runs inside the drop-in's node (:func:`node_s`); the
    ``torch-autograd`` model is torch.einsum's own call.
    """
    seconds = predict_time(result.events, result.sizes(size_dict), DTYPE_ITEMSIZE[dtype],
                           profile, dtype).total_s
    return seconds + (node_s(profile) if get_strategy(result.name).lowered else 0.0)


def call_profile(device: str, dtype: str) -> DeviceProfile:
    """The profile a call's seconds are predicted on: its tensors' device's.

    The process's calibration of that device and dtype where one was made (a run, or
    :func:`einsum_analyze.backends.calibration.calibrate`), else the device kind's
    nominal profile (a CUDA device by its name; docs/roofline.md); a calibration of
    another dtype has no rate for this one, so the nominal profile serves then too.
    """
    from ..backends.calibration import device_profile

    return device_profile(device, dtype)


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
        profile: The device profile the seconds are predicted on (the call's device's,
            :func:`call_profile`).
    """

    result: StrategyResult
    runs_torch: bool
    reason: str
    profile: DeviceProfile = DEFAULT_PROFILE


def choose_dropin(equation: str, shapes: Sequence[Sequence[int]], dtype: str,
                  grad: Sequence[int], strategy: str, optimize: str,
                  budget: int, device: str = "cpu") -> DropinChoice:
    """:func:`_choose_dropin` within the planning time (:func:`planning_time`).

    Its seconds are predicted on the profile of ``device``, the operands' device
    (:func:`call_profile`).
    """
    profile = call_profile(device, dtype)
    with search_deadline(_PLAN_S.get()):
        choice = _choose_dropin(equation, shapes, dtype, grad, strategy, optimize, budget,
                                profile, torch_peak_exact(dtype, device))
    return replace(choice, profile=profile)


def torch_peak_exact(dtype: str, device: str) -> bool:
    """Whether the ``torch-autograd`` model's peak may bind a budget for this dtype.

    It leaves out two kinds of copies torch.einsum makes (docs/method.md, section 9):
    those of lazily conjugated tensors in a complex backward (``MulBackward0`` and
    ``BmmBackward0`` read ``other.conj()``), and the float32 temporaries of a float16 or
    bfloat16 sum on the cpu (``should_use_acc_buffer``). Under a budget, torch.einsum
    then does not run: its measured peak may be over it (``d,`` in complex64: 48 B
    predicted, 56 B measured). Our plans' models count both.
    """
    if dtype.startswith("complex"):
        return False
    return not (DTYPE_ITEMSIZE[dtype] == 2 and not device.startswith("cuda"))


def _choose_dropin(equation: str, shapes: Sequence[Sequence[int]], dtype: str,
                   grad: Sequence[int], strategy: str, optimize: str,
                   budget: int, profile: DeviceProfile,
                   torch_exact: bool = True) -> DropinChoice:
    """The plan of :func:`choose_plan`, or torch.einsum's own execution under ``auto``.

    With ``strategy="auto"``, torch.einsum runs unless our plan is predicted to take at
    most :data:`TIME_MARGIN` of its time with no higher a predicted peak (and, for one or
    two operands, with no more FLOPs), or torch.einsum's predicted peak is over
    ``budget``, or there is a budget and its model does not predict its peak exactly
    (``torch_exact``, :func:`torch_peak_exact`). A named strategy always runs as
    asked: ``torch-autograd``, the model of torch.einsum's own execution, runs
    torch.einsum.

    Example:
        ``ij,jk->ik`` with sizes 2, 3, 4 does the same work either way, so torch.einsum
        runs: ``choose_dropin("ij,jk->ik", [(2, 3), (3, 4)], "float32", [0, 1], "auto",
        "auto", NO_BUDGET).runs_torch`` is True.

    Raises:
        EinsumAnalyzeError: Bad input, or a budget that neither torch.einsum nor any
            plan meets (the message gives the smallest reachable peak).
    """
    if strategy != "auto" and not get_strategy(strategy).lowered:
        return _torch_asked(equation, shapes, dtype, grad, strategy, optimize, budget,
                            profile, torch_exact)
    if strategy != "auto":
        result = choose_plan(equation, shapes, dtype, grad, strategy, optimize, budget, profile)
        return DropinChoice(result=result, runs_torch=False,
                            reason=f"strategy {result.name!r} asked for")
    if not set(equation) <= _TORCH_CHARACTERS:
        result = choose_plan(equation, shapes, dtype, grad, strategy, optimize, budget, profile)
        return DropinChoice(result=result, runs_torch=False, reason=(
            f"{result.name!r}: torch.einsum reads only the labels a-z and A-Z"))
    torch_report = analyze(equation, shapes, max_search_s=_left_s(), dtype=dtype,
                           grad=list(grad), strategies=["torch-autograd"])
    (torch_model,) = torch_report.strategies
    sizes = torch_report.equation.size_dict
    torch_peak = torch_model.memory.peak_bytes
    torch_s = predicted_s(torch_model, sizes, dtype, profile)
    if budget != NO_BUDGET and torch_peak > budget:
        result = _ours_within(equation, shapes, dtype, grad, optimize, budget, profile)
        return DropinChoice(result=result, runs_torch=False, reason=(
            f"torch.einsum's predicted peak {format_exact_bytes(torch_peak)} is over the "
            f"budget of {format_exact_bytes(budget)}; {result.name!r} peaks at "
            f"{format_exact_bytes(result.memory.peak_bytes)}"))
    if budget != NO_BUDGET and not torch_exact:
        result = _ours_within(equation, shapes, dtype, grad, optimize, budget, profile)
        return DropinChoice(result=result, runs_torch=False, reason=(
            f"{result.name!r}: a budget of {format_exact_bytes(budget)} binds, and "
            f"torch.einsum's peak is not predicted exactly for {dtype} (its model leaves "
            f"copies out); {result.name!r} peaks at "
            f"{format_exact_bytes(result.memory.peak_bytes)}"))
    try:
        result = choose_plan(equation, shapes, dtype, grad, strategy, optimize, budget, profile)
    except EinsumAnalyzeError:
        if budget == NO_BUDGET:
            raise
        result = choose_plan(equation, shapes, dtype, grad, strategy, optimize, NO_BUDGET, profile)
    ours_s = predicted_s(result, sizes, dtype, profile)
    peak = result.memory.peak_bytes
    figures = (f"{result.name!r} predicted {format_seconds(ours_s)}, peak "
               f"{format_exact_bytes(peak)}; torch.einsum {format_seconds(torch_s)}, peak "
               f"{format_exact_bytes(torch_peak)}; seconds on {profile.name}, "
               f"{profile.source}")
    if peak > torch_peak:
        return DropinChoice(result=result, runs_torch=True,
                            reason=f"torch.einsum: no plan peaks lower ({figures})")
    ours_flops = result.forward_flops + result.backward_flops
    torch_flops = torch_model.forward_flops + torch_model.backward_flops
    if len(shapes) <= 2 and ours_flops > torch_flops:
        # One contraction either way: a plan doing more arithmetic is predicted faster
        # only by the per-kernel host costs, which the nominal profile does not know well
        # enough (``ijj,k->ik`` at 8x32x32 and 16: predicted 0.84x, measured 1.14x).
        return DropinChoice(result=result, runs_torch=True, reason=(
            f"torch.einsum: no plan does as little arithmetic ({figures}; "
            f"{ours_flops:,} FLOPs against {torch_flops:,})"))
    if ours_s >= torch_s or ours_s > TIME_MARGIN * torch_s:
        return DropinChoice(result=result, runs_torch=True,
                            reason=f"torch.einsum: no plan is predicted faster ({figures})")
    return DropinChoice(result=result, runs_torch=False,
                        reason=f"{result.name!r}: predicted faster ({figures})")


def _ours_within(equation: str, shapes: Sequence[Sequence[int]], dtype: str,
                 grad: Sequence[int], optimize: str, budget: int,
                 profile: DeviceProfile) -> StrategyResult:
    """``auto``'s plan of ours within ``budget``, where torch.einsum may not run.

    The search's recommendation; where it has none of ours within the budget
    (torch.einsum's own won it, or its sliced fallback, which it scores only for
    gradients, was not scored), each lowered strategy on the forward path, as for
    ``strategy="reverse"`` (the fewest FLOPs that fit).

    Raises:
        EinsumAnalyzeError: No plan of ours fits (the smallest reachable peak given).
    """
    refused: EinsumAnalyzeError | None = None
    try:
        result = choose_plan(equation, shapes, dtype, grad, "auto", optimize, budget, profile)
        if get_strategy(result.name).lowered:
            return result
    except EinsumAnalyzeError as err:
        refused = err
    try:
        return choose_plan(equation, shapes, dtype, grad, "reverse", optimize, budget,
                           profile)
    except EinsumAnalyzeError:
        if refused is not None:
            raise refused from None  # the search's smallest peak, over its paths
        raise


def _torch_asked(equation: str, shapes: Sequence[Sequence[int]], dtype: str,
                 grad: Sequence[int], strategy: str, optimize: str, budget: int,
                 profile: DeviceProfile, torch_exact: bool) -> DropinChoice:
    """A strategy that models torch.einsum's own execution, asked for: torch.einsum runs.

    The choice's ``result`` is ``reverse`` mode's plan (what a graphed call would replay);
    eager and traced calls run torch.einsum, whose peak the strategy's model predicts.

    Raises:
        EinsumAnalyzeError: A budget that the model's peak is over, or any budget where
            that peak is not exact (:func:`torch_peak_exact`).
    """
    name = get_strategy(strategy).name
    model = _model(equation, shapes, dtype, grad, name, optimize, NO_BUDGET)
    peak = model.memory.peak_bytes
    if budget != NO_BUDGET and (peak > budget or not torch_exact):
        why = (f"peaks at {format_exact_bytes(peak)}, over the budget of "
               f"{format_exact_bytes(budget)}" if peak > budget else
               f"has a peak not predicted exactly for {dtype} (its model leaves copies "
               f"out), which a budget of {format_exact_bytes(budget)} cannot bind")
        raise EinsumAnalyzeError(f"strategy {name!r} (torch.einsum's own execution) {why}; "
                                 "use strategy='auto'")
    result = choose_plan(equation, shapes, dtype, grad, "reverse", optimize, NO_BUDGET, profile)
    return DropinChoice(result=result, runs_torch=True, reason=(
        f"strategy {name!r} asked for: torch.einsum, predicted peak "
        f"{format_exact_bytes(peak)}"))


def choose_plan(equation: str, shapes: Sequence[Sequence[int]], dtype: str,
                grad: Sequence[int], strategy: str, optimize: str,
                budget: int, profile: DeviceProfile | None = None) -> StrategyResult:
    """Model the strategy to run: ``strategy`` (``auto`` resolved), fitted to ``budget``.

    ``auto``'s search predicts seconds on ``profile`` (None: the nominal cpu profile).

    Raises:
        EinsumAnalyzeError: Bad input, or a budget no plan meets (the message gives the
            smallest reachable peak).
    """
    if strategy == "auto":
        recommended = _recommended(equation, shapes, dtype, grad, optimize, budget,
                                   profile)
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
            f"strategy {first.name!r} peaks at {format_exact_bytes(first.memory.peak_bytes)}, "
            f"over the budget of {format_exact_bytes(budget)}; strategy "
            f"{fitting[0].name!r} fits (or use strategy='auto')"
        )
    raise EinsumAnalyzeError(
        f"no plan fits the budget of {format_exact_bytes(budget)}: the smallest reachable "
        f"peak is {format_exact_bytes(best.memory.peak_bytes)}, with strategy "
        f"{best.name!r}, inputs counted"
    )


def _model(equation: str, shapes: Sequence[Sequence[int]], dtype: str, grad: Sequence[int],
           name: str, optimize: str | Sequence[Sequence[int]], budget: int,
           options: Mapping[str, Any] | None = None) -> StrategyResult:
    chosen = {**get_strategy(name).dropin_options, **(options or {})}
    if budget != NO_BUDGET and "budget_bytes" in get_strategy(name).options:
        chosen.setdefault("budget_bytes", budget)
    report = analyze(equation, shapes, max_search_s=_left_s(), optimize=optimize, dtype=dtype,
                     grad=list(grad), strategies=[name],
                     strategy_options={name: chosen} if chosen else None)
    return report.strategies[0]


def _recommended(equation: str, shapes: Sequence[Sequence[int]], dtype: str,
                 grad: Sequence[int], optimize: str, budget: int,
                 profile: DeviceProfile | None) -> StrategyResult | None:
    """The training-aware search's recommended plan (docs/method.md section 11).

    The search scores candidate paths with the strategies that run on our executor by
    the time model's predicted seconds (``time``, on ``profile``: the call's device's,
    None for the nominal cpu profile), and
    recommends the fastest within a budget: the caller's
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
        (torch_model,) = analyze(equation, shapes, max_search_s=_left_s(), dtype=dtype,
                                 grad=list(grad), strategies=["torch-autograd"]).strategies
        cap = torch_model.memory.peak_bytes
    dropin = {name: get_strategy(name).dropin_options for name in strategies
              if get_strategy(name).dropin_options}
    report = analyze(equation, shapes, max_search_s=_left_s(), dtype=dtype, grad=list(grad),
                     optimize=optimize, strategies=strategies, objective="time",
                     profile=profile,
                     strategy_options=dropin or None,
                     # zero-size operands: nothing to cap
                     budget=cap if cap > 0 else None, fallback=bounded)
    recommended = report.recommended
    if recommended is None:
        return None
    plan = recommended.plan
    if plan.source == TORCH_SOURCE and report.search is not None:
        # torch.einsum's own execution won: :func:`choose_dropin` runs it where it may;
        # here the fastest plan of ours that fits as well is what a traced call runs.
        ours = [p for p in report.search.pareto if p.source != TORCH_SOURCE]
        fitting = [p for p in ours if p.fits(recommended.budget_bytes)]
        if fitting:
            plan = min(fitting, key=objective_key(report.search.objective))
        elif ours:
            # None of ours fits: the least peak of ours, which :func:`choose_dropin`
            # compares with torch.einsum's (the torch-autograd model is not a plan of
            # ours: its events on our executor are not what it models).
            least = min(ours, key=lambda p: p.peak_bytes)
            if bounded:
                raise EinsumAnalyzeError(
                    f"no plan fits the budget of {format_exact_bytes(budget)}: the "
                    f"smallest reachable peak is {format_exact_bytes(least.peak_bytes)}, "
                    f"with strategy {least.strategy!r} on the {least.source} path, inputs "
                    "counted")
            return least.result
        else:
            return None  # the caller models reverse mode on the forward path
    if not recommended.fits and bounded:
        raise EinsumAnalyzeError(
            f"no plan fits the budget of {format_exact_bytes(budget)}: the smallest "
            f"reachable peak is {format_exact_bytes(plan.peak_bytes)}, with strategy "
            f"{plan.strategy!r} on the {plan.source} path, inputs counted"
        )
    return plan.result  # within the cap, or else the least peak any plan reaches
