"""The roofline of a report whose strategies ran: calibrate each device, bound each step.

After the runs, every device that ran something is calibrated
(:mod:`einsum_analyze.backends.calibration`, cached per process) in the report's dtype.
The calibrations go into the report's ``environment.calibration``; the report's roofline,
unless one was given (``--roofline``), uses the first device's calibrated profile; each
run of a modelled strategy (the torch-autograd baseline's model included) gets the time
model's prediction on its own device's profile, beside its measured time; and each step a
run timed (``--profile-steps``) gets its bound and predicted time there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ..backends.base import Run
from ..report.report import Report
from ..roofline import DeviceProfile, build_roofline
from ..strategies import build_strategy

__all__ = ["attach_calibration"]


def _bounded(run: Run, report: Report, profile: DeviceProfile) -> Run:
    """The run with its predicted time, and every timed step's bound, on ``profile``."""
    roofline = build_roofline(report, profile, names=(run.strategy,)).strategy(run.strategy)
    if roofline is None and run.strategy == "torch-autograd" and run.skipped is None:
        # The baseline runs whether or not its model was asked for: model it here.
        model = build_strategy("torch-autograd", report.plan, report.grad_operands,
                               itemsize=report.itemsize)
        with_model = replace(report, strategies=(model,))
        roofline = build_roofline(with_model, profile).strategy(run.strategy)
    if roofline is None:
        return run
    steps = tuple(replace(step, bound_s=roofline.step_bound_s(step.event),
                          predicted_s=roofline.step_predicted_s(step.event))
                  for step in run.steps)
    return replace(run, steps=steps, predicted=roofline.predicted)


def attach_calibration(report: Report, runs: Sequence[Run], ran: Report) -> Report:
    """``report`` with ``runs`` bounded, its calibrations, and a calibrated roofline.

    Args:
        report: The report to return, its runs not yet set.
        runs: The runs, in order.
        ran: The report the runs were made from (it may hold one more strategy: the
            recommended plan's).
    """
    from ..backends.calibration import calibrate

    devices = list(dict.fromkeys(r.device for r in runs if r.skipped is None))
    calibrations = {device: calibrate(device, report.dtype) for device in devices}
    bounded = tuple(
        _bounded(run, ran, calibrations[run.device].profile()) if run.device in calibrations
        else run
        for run in runs
    )
    environment = dict(report.environment)
    if calibrations:
        environment["calibration"] = [c.to_dict() for c in calibrations.values()]
    roofline = report.roofline
    if roofline is None and calibrations and report.strategies:
        roofline = build_roofline(report, next(iter(calibrations.values())).profile())
    return replace(report, runs=bounded, environment=environment, roofline=roofline)
