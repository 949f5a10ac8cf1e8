"""The report's roofline: every strategy's steps against one device profile.

For each step (:mod:`.steps`) the lower-bound time is ``max(flops / rate, bytes /
bandwidth)``; a strategy's bound is the sum over its steps, forward and backward. The
layout copies' bytes are reported beside, never in the bound. The time model's prediction
(:mod:`.time_model`: the bound, the copies and a cost per kernel) is given beside it.

Analysis only: no torch, no allocation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from .profiles import DeviceProfile
from .steps import StepCost, step_costs
from .time_model import PredictedTime, predict_steps, step_times

R = TypeVar("R")

__all__ = ["Roofline", "StrategyRoofline", "build_roofline", "with_roofline"]


@dataclass(frozen=True, slots=True, kw_only=True)
class StrategyRoofline:
    """One strategy's steps and their bounds.

    Attributes:
        strategy: The strategy's name.
        steps: Every computing step, in schedule order.
        flops_per_s: The profile's rate for the report's dtype.
        bandwidth_bytes_per_s: The profile's bandwidth.
        launch_s: The profile's seconds per kernel.
        predicted: The time model's forward and backward seconds.
        step_predicted: The time model's seconds of each step, in ``steps``' order.
    """

    strategy: str
    steps: tuple[StepCost, ...]
    flops_per_s: float
    bandwidth_bytes_per_s: float
    launch_s: float
    predicted: PredictedTime
    step_predicted: tuple[float, ...] = ()

    def bound_s(self, phase: str | None = None) -> float:
        """The sum of the steps' bounds (of one phase, when given)."""
        return sum(step.bound_s(self.flops_per_s, self.bandwidth_bytes_per_s)
                   for step in self.steps if phase is None or step.phase == phase)

    def step_bound_s(self, event: int) -> float | None:
        """The bound of the step made by event ``event``; None for a non-computing one."""
        for step in self.steps:
            if step.event == event:
                return step.bound_s(self.flops_per_s, self.bandwidth_bytes_per_s)
        return None

    def step_predicted_s(self, event: int) -> float | None:
        """The predicted time of the step made by event ``event``; None for another."""
        for step, seconds in zip(self.steps, self.step_predicted, strict=True):
            if step.event == event:
                return seconds
        return None

    def to_dict(self) -> dict[str, Any]:
        """One entry of the roofline's ``strategies``."""
        rate, bandwidth = self.flops_per_s, self.bandwidth_bytes_per_s
        return {
            "strategy": self.strategy,
            "bound_s": self.bound_s(),
            "forward_bound_s": self.bound_s("forward"),
            "backward_bound_s": self.bound_s("backward"),
            "flops": sum(s.flops for s in self.steps),
            "flops_convention": sum(s.flops_convention for s in self.steps),
            "bytes": sum(s.bytes for s in self.steps),
            "copy_bytes": sum(s.copy_bytes for s in self.steps),
            "predicted": self.predicted.to_dict(),
            "steps": [step.to_dict(rate, bandwidth, self.launch_s) | {"predicted_s": seconds}
                      for step, seconds in zip(self.steps, self.step_predicted, strict=True)],
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Roofline:
    """The report's ``roofline`` section.

    Attributes:
        profile: The device profile the bounds use.
        dtype: The report's dtype (the profile's rate is this dtype's).
        strategies: One entry per strategy, in the report's order.
    """

    profile: DeviceProfile
    dtype: str
    strategies: tuple[StrategyRoofline, ...]

    def strategy(self, name: str) -> StrategyRoofline | None:
        """The entry of strategy ``name``, if any."""
        return next((s for s in self.strategies if s.strategy == name), None)

    def to_dict(self) -> dict[str, Any]:
        """The JSON section (schema: ``roofline``)."""
        return {
            "profile": self.profile.to_dict(self.dtype),
            "strategies": [s.to_dict() for s in self.strategies],
        }


def build_roofline(report: Any, profile: DeviceProfile,
                   names: Sequence[str] | None = None) -> Roofline:
    """The roofline of the report's strategies (or of those in ``names``) on ``profile``.

    ``report`` is a :class:`~einsum_analyze.report.Report` (not imported: the report
    holds a roofline).

    Raises:
        PlanningError: The profile has no rate for the report's dtype.
    """
    rate = profile.rate(report.dtype)
    sizes = report.equation.size_dict
    rows = []
    for s in report.strategies:
        if names is not None and s.name not in names:
            continue
        steps = step_costs(s.events, s.sizes(sizes), report.itemsize)
        rows.append(StrategyRoofline(
            strategy=s.name, steps=steps, flops_per_s=rate,
            bandwidth_bytes_per_s=profile.bandwidth_bytes_per_s, launch_s=profile.launch_s,
            predicted=predict_steps(steps, profile, report.dtype),
            step_predicted=step_times(steps, profile, report.dtype)))
    return Roofline(profile=profile, dtype=report.dtype, strategies=tuple(rows))


def with_roofline(report: R, profile: DeviceProfile) -> R:
    """The report with its ``roofline`` section on ``profile`` (its strategies')."""
    return replace(report, roofline=build_roofline(report, profile))  # type: ignore[type-var]
