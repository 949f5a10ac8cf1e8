"""The time model: predicted forward and backward seconds of a schedule on a device.

Each computing step (:mod:`.steps`) is predicted to take its roofline bound, ``max(flops /
rate, bytes / bandwidth)``, plus its layout copies at the bandwidth, plus the profile's
``launch_s`` for each kernel it runs (an eager call's host dispatch and, on a GPU, its
launch). A schedule's time is the sum over its steps, by phase. With a calibrated
profile (:mod:`einsum_analyze.backends.calibration`) every term is measured on the
device; the nominal profiles (``--device none``) give an order of magnitude.

The search ranks plans by it (``--objective time``), the report shows it beside every
measured time. Analysis only: no torch, no allocation.

Example:
    >>> from einsum_analyze import analyze
    >>> from einsum_analyze.roofline import NOMINAL
    >>> report = analyze("ab,bc->ac", [(2, 3), (3, 4)], strategies=("reverse",))
    >>> s = report.strategies[0]
    >>> t = predict_time(s.events, s.sizes(report.equation.size_dict), 4, NOMINAL["cpu"],
    ...                  "float32")
    >>> t.launches, round(t.total_s * 1e6)
    (3, 12)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..model.schedule import Event
from .profiles import DeviceProfile
from .steps import StepCost, step_costs

__all__ = ["PredictedTime", "predict_steps", "predict_time"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PredictedTime:
    """A plan's predicted seconds on one device profile.

    Attributes:
        forward_s: Seconds of the forward pass.
        backward_s: Seconds of the backward pass (recomputation included).
        launches: Kernels of both passes.
        profile: The profile's name (``cpu``, ``h200``, ``cuda:0``).
        source: The profile's source (``nominal``, ``file``, ``calibrated``).
    """

    forward_s: float
    backward_s: float
    launches: int
    profile: str
    source: str

    @property
    def total_s(self) -> float:
        """Forward plus backward seconds."""
        return self.forward_s + self.backward_s

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (schema: ``predicted_time``)."""
        return {
            "forward_s": self.forward_s,
            "backward_s": self.backward_s,
            "total_s": self.total_s,
            "launches": self.launches,
            "profile": self.profile,
            "source": self.source,
        }


def predict_steps(steps: Sequence[StepCost], profile: DeviceProfile,
                  dtype: str) -> PredictedTime:
    """The predicted time of costed steps (see the module).

    Raises:
        PlanningError: The profile has no rate for ``dtype``.
    """
    rate = profile.rate(dtype)
    bandwidth = profile.bandwidth_bytes_per_s
    phases = {"forward": 0.0, "backward": 0.0}
    for step in steps:
        phases[step.phase] += step.predicted_s(rate, bandwidth, profile.launch_s)
    return PredictedTime(forward_s=phases["forward"], backward_s=phases["backward"],
                         launches=sum(step.launches for step in steps),
                         profile=profile.name, source=profile.source)


def predict_time(events: Sequence[Event], sizes: Mapping[str, int], itemsize: int,
                 profile: DeviceProfile, dtype: str) -> PredictedTime:
    """The predicted time of a schedule's events on ``profile`` (see the module).

    Args:
        events: The schedule (a strategy's ``events``).
        sizes: Every label's size, the schedule's own included (a strategy's ``sizes``).
        itemsize: Bytes per element.
        profile: The device profile.
        dtype: The dtype whose rate applies.

    Raises:
        PlanningError: The profile has no rate for ``dtype``.
    """
    return predict_steps(step_costs(events, sizes, itemsize), profile, dtype)
