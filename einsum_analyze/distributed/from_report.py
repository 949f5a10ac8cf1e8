"""The runner of a report's ``sliced`` strategy, for :func:`.run.run_distributed`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import PlanningError
from .schedule_runner import ScheduleSlices

if TYPE_CHECKING:
    from ..report import Report

__all__ = ["runner_for"]


def runner_for(report: Report) -> ScheduleSlices:
    """The report's ``sliced`` strategy as a slice runner.

    Raises:
        PlanningError: The report has no ``sliced`` strategy.
    """
    strategy = next((s for s in report.strategies if s.name == "sliced"), None)
    if strategy is None:
        raise PlanningError("--devices runs the sliced strategy: add sliced to --strategy "
                            "(with --budget to choose the slices)")
    slicing = getattr(strategy, "slicing", None)
    if slicing is None:
        raise PlanningError("the sliced strategy of this report carries no slice plan")
    grad = report.gradients.operands if report.gradients is not None else report.grad_operands
    return ScheduleSlices(plan=report.plan, slices=slicing.plan, grad=tuple(grad),
                          itemsize=report.itemsize, strategy=slicing.strategy,
                          options=dict(slicing.options))
