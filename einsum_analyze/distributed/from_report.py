"""The runner of a report's ``sliced`` strategy, for :func:`.run.run_distributed`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import PlanningError
from .schedule_runner import ScheduleSlices

if TYPE_CHECKING:
    from ..report.report import Report

__all__ = ["runner_for"]


def runner_for(report: Report) -> ScheduleSlices:
    """The report's ``sliced`` strategy as a slice runner.

    The slice plan comes from the strategy's ``slicing`` section (indices, sizes,
    chunks, per-slice strategy); the runner's schedule of every slice is checked to be
    the strategy's own, so the devices run what the report modelled.

    Raises:
        PlanningError: The report has no ``sliced`` strategy, or its schedule cannot be
            rebuilt from its section.
    """
    from ..model.lowering import lower_events
    from ..slicing import SlicePlan

    strategy = next((s for s in report.strategies if s.name == "sliced"), None)
    if strategy is None:
        raise PlanningError("--devices runs the sliced strategy: add sliced to --strategy "
                            "(with --budget to choose the slices)")
    section = strategy.details.get("slicing")
    if not section:
        raise PlanningError("the sliced strategy of this report carries no slice plan")
    slices = SlicePlan(tuple(section["indices"]), tuple(section["sizes"]),
                       tuple(section["chunks"]))
    runner = ScheduleSlices(plan=report.plan, slices=slices,
                            grad=tuple(sorted(report.grad_operands)),
                            itemsize=report.itemsize,
                            strategy=str(section.get("per_slice_strategy", "reverse")),
                            options=dict(section.get("per_slice_options") or {}))
    eq = report.plan.equation
    schedule = runner.full_schedule()
    events = tuple(lower_events(schedule.events, eq.terms, schedule.sizes(eq.size_dict)))
    if events != tuple(strategy.events):
        raise PlanningError("the sliced strategy's schedule could not be rebuilt from its "
                            "slicing section (per-slice options?)")
    return runner
