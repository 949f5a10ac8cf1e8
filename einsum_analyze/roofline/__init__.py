"""The roofline: what each step of each strategy must cost at least on a device.

:mod:`.profiles` holds device profiles (nominal, from a file, or calibrated on the
device), :mod:`.steps` each step's FLOPs and bytes as the lowered kernels run it,
:mod:`.time_model` the predicted seconds of a schedule (bounds plus a cost per kernel),
:mod:`.host` the host's seconds around the kernels,
:mod:`.model` the report's section; its terminal tables are in
:mod:`einsum_analyze.render.roofline`, and the calibration of the devices that ran in
:mod:`einsum_analyze.runs.roofline`. Analysis only: nothing here imports torch or
allocates, and nothing but :mod:`einsum_analyze.model` (docs/architecture.md).
"""

from __future__ import annotations

from .host import HostCosts, host_from_dict
from .model import Roofline, StrategyRoofline, build_roofline, with_roofline
from .profiles import NOMINAL, DeviceProfile, load_profile, profile_from_dict, profile_names
from .steps import StepCost, StepTime, gradient_nodes, step_cost, step_costs
from .time_model import (
    PredictedTime,
    host_kernel_seconds,
    interpolate,
    kernel_seconds,
    predict_steps,
    predict_time,
    step_seconds,
    step_times,
)

__all__ = [
    "NOMINAL",
    "DeviceProfile",
    "HostCosts",
    "PredictedTime",
    "Roofline",
    "StepCost",
    "StepTime",
    "StrategyRoofline",
    "build_roofline",
    "gradient_nodes",
    "host_from_dict",
    "host_kernel_seconds",
    "interpolate",
    "kernel_seconds",
    "load_profile",
    "profile_from_dict",
    "profile_names",
    "predict_steps",
    "predict_time",
    "step_seconds",
    "step_times",
    "step_cost",
    "step_costs",
    "with_roofline",
]
