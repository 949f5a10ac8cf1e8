"""The time model: predicted forward and backward seconds of a schedule on a device.

Each computing step (:mod:`.steps`) is priced by its kernel class. A calibrated profile
(:mod:`einsum_analyze.backends.calibration`) carries each class's measured seconds at a
few sizes (``kernel_times``); a step's main kernel takes its class's time at the step's
work, interpolated log-log between the measured sizes (the smallest's time below them,
proportional beyond the largest):

- ``bmm`` and ``einsum``: the larger of the square product's time at the step's FLOPs
  and the skinny product's (contracted size 2) at its bytes: a product of small or thin
  matrices runs far below the large product's rate; a batched matrix-vector product
  summing 2 to 4 elements (:attr:`.steps.StepCost.vector`) at least the ``matvec``
  class's time at its bytes, slower still; a torch.einsum call that torch runs as a
  batched outer product (:attr:`.steps.StepCost.outer`) at least the ``outer``
  class's time at its bytes;
- ``mul``: a broadcast product at its bytes, as is ``narrow`` (a product run as ``k``
  multiply-adds: its bytes count the output ``2k - 1`` times, its launches ``k``);
  ``reduce``: a sum over the last dimension;
  ``copy``, ``unreduce`` and slicing's buffers: a layout copy; every class allocates its
  output, as a step does, so first-touch of fresh memory is in the figures;
- each layout copy of an input: the copy class at its bytes; each other kernel of the
  step (an input's private sum): the profile's ``launch_s``;
- the host's Python around the kernels (:mod:`.host`, the profile's ``host``): our
  executor's cost per step and per label of its terms, per run of each phase and per
  kind of step in it other than a product; for the
  ``torch-autograd`` model (its steps' ``runner`` is ``"torch"``), torch.einsum's
  forward call at its number of operands and autograd's backward call at its number of
  gradient contractions (:meth:`.host.HostCosts.backward_call_s`). A phase's cost is
  given to its first step.

Without ``kernel_times`` (the nominal profiles, ``--device none``, or a profile file), a
step takes its roofline bound, ``max(flops / rate, bytes / bandwidth)``, plus its layout
copies at the bandwidth, plus ``launch_s`` for each kernel: an order of magnitude. A
schedule's time is the sum over its steps, by phase. On a GPU (a profile whose
``is_async`` is set: CUDA's calibrations and the nominal GPUs) the host queues kernels
while earlier ones run, so a phase takes the larger of its kernels' seconds and its
host's (every step's own cost, its kernels' dispatch at ``launch_s`` each and the
phase's cost), not their sum (:func:`step_times`). The calibration prices the host's
costs against the same side (:func:`host_kernel_seconds`): on a GPU what a chain of
tiny steps costs beyond its kernels' dispatch, on the cpu beyond their seconds.

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
    (3, 78)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..model.schedule import Event
from .host import interpolate
from .profiles import DeviceProfile
from .steps import StepCost, gradient_nodes, step_costs

__all__ = ["KERNEL_CLASSES", "PredictedTime", "host_kernel_seconds", "interpolate",
           "kernel_seconds", "phase_seconds", "predict_steps", "predict_time", "step_seconds",
           "step_times"]

KERNEL_CLASSES = ("bmm", "skinny", "matvec", "outer", "mul", "reduce", "copy")
"""The classes a calibration measures (:attr:`DeviceProfile.kernel_times`)."""

_MAIN_CLASS = {"mul": "mul", "narrow": "mul", "reduce": "reduce", "copy": "copy",
               "unreduce": "copy", "zeros": "copy", "slice_copy": "copy", "accumulate": "copy"}
"""The class of a step's main kernel by its ``kernel`` (products: ``bmm``/``skinny``)."""

PRODUCTS = frozenset({"bmm", "narrow", "einsum"})
"""The steps' kernels that are products: the calibration's chains are made of them, so a
phase's cost per kind of step (``forward_kind_s``, ``backward_kind_s``) is for each kind
besides them (:func:`phase_seconds`)."""


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


def kernel_seconds(step: StepCost, profile: DeviceProfile, dtype: str) -> float:
    """One step's kernels' predicted seconds on ``profile``, host costs left out.

    Raises:
        PlanningError: The profile has no rate for ``dtype``.
    """
    times = profile.kernel_times
    if not times:
        return step.predicted_s(profile.rate(dtype), profile.bandwidth_bytes_per_s,
                                profile.launch_s)
    main = _MAIN_CLASS.get(step.kernel)
    if main is None:  # a product: bmm, or an einsum call
        seconds = max(interpolate(times["bmm"], step.flops),
                      interpolate(times["skinny"], step.bytes))
        if step.vector and "matvec" in times:
            seconds = max(seconds, interpolate(times["matvec"], step.bytes))
        if step.outer and "outer" in times:
            seconds = max(seconds, interpolate(times["outer"], step.bytes))
    else:
        seconds = interpolate(times[main], step.bytes or step.copy_bytes)
    extra = step.launches - 1
    if step.bytes and step.copy_bytes and step.kernel != "copy":
        seconds += interpolate(times["copy"], step.copy_bytes)
        extra -= 1
    return seconds + max(0, extra) * profile.launch_s


def step_seconds(step: StepCost, profile: DeviceProfile, dtype: str) -> float:
    """One step's predicted seconds on ``profile``: its kernels and its own host cost.

    The host's cost of the step itself (:mod:`.host`): our executor's ``step_s`` and
    ``label_s`` for each label of its terms; none under torch autograd, whose calls are
    its phases'. A phase's costs (:func:`step_times`) are not in it.

    Raises:
        PlanningError: The profile has no rate for ``dtype``.
    """
    host = profile.host
    if step.runner == "torch":
        own = 0.0  # torch.einsum's and autograd's calls: the phase's (phase_seconds)
    elif step.phase == "backward":
        own = host.backward_step_s + step.labels * host.backward_label_s
    else:
        own = host.forward_step_s + step.labels * host.forward_label_s
    return kernel_seconds(step, profile, dtype) + own


def phase_seconds(steps: Sequence[StepCost], profile: DeviceProfile, phase: str) -> float:
    """The host's seconds for running ``phase``'s steps once, beyond every step's own.

    Our executor's run of a phase (``forward_run_s``, ``backward_run_s``) and each kind
    of step in it other than a product (``forward_kind_s``, ``backward_kind_s``: the
    calibration's chains of products against five kinds); torch.einsum's
    forward call (its figure at the call's operands) or autograd's backward call (at its
    gradient contractions, :func:`.steps.gradient_nodes`: the phase's steps but the
    reductions torch's product nodes make themselves). Zero for a phase with no step.
    """
    first = next((step for step in steps if step.phase == phase), None)
    if first is None:
        return 0.0
    host = profile.host
    if first.runner != "torch":
        kinds = len({step.kernel for step in steps if step.phase == phase} - PRODUCTS)
        if phase == "backward":
            return host.backward_run_s + kinds * host.backward_kind_s
        return host.forward_run_s + kinds * host.forward_kind_s
    if phase == "backward":
        return host.backward_call_s(gradient_nodes(steps))
    if not host.torch_forward:
        return 0.0
    return interpolate(host.torch_forward, max(1, first.call_operands))


def host_kernel_seconds(step: StepCost, profile: DeviceProfile, dtype: str) -> float:
    """What the host's side of a phase charges for one step's kernels.

    On an asynchronous device (:attr:`DeviceProfile.is_async`) the host only queues
    them: ``launch_s`` each, and our executor's ``dispatch_s`` each on top (0 unless a
    profile file sets it). Elsewhere the host waits for them: their seconds
    (:func:`kernel_seconds`). The host calibration
    (:mod:`einsum_analyze.backends.host_calibration`) takes this price away from its
    chains' times, so that their host costs are what the model charges beside it.

    Raises:
        PlanningError: The profile has no rate for ``dtype``.
    """
    if not profile.is_async:
        return kernel_seconds(step, profile, dtype)
    dispatch = profile.launch_s + (profile.host.dispatch_s if step.runner != "torch" else 0.0)
    return step.launches * dispatch


def step_times(steps: Sequence[StepCost], profile: DeviceProfile,
               dtype: str) -> tuple[float, ...]:
    """Each step's predicted seconds; a phase's host cost goes to its first step.

    On an asynchronous device (:attr:`DeviceProfile.is_async`) each phase is bound by
    one side: its kernels, where their seconds exceed the host's, and then each step
    takes its kernels' seconds; else the host, and each step takes its host's seconds
    (its own, its kernels' dispatch, :func:`host_kernel_seconds`, and the phase's on
    the first). The seconds add up to
    :func:`predict_steps`' forward and backward.

    Raises:
        PlanningError: The profile has no rate for ``dtype``.
    """
    kernels = [kernel_seconds(step, profile, dtype) for step in steps]
    seconds = [step_seconds(step, profile, dtype) for step in steps]
    for phase in ("forward", "backward"):
        members = [n for n, step in enumerate(steps) if step.phase == phase]
        if not members:
            continue
        seconds[members[0]] += phase_seconds(steps, profile, phase)
        if not profile.is_async:
            continue
        host = [seconds[n] - kernels[n] + host_kernel_seconds(steps[n], profile, dtype)
                for n in members]
        if sum(kernels[n] for n in members) >= sum(host):
            for n in members:
                seconds[n] = kernels[n]
        else:
            for n, spent in zip(members, host, strict=True):
                seconds[n] = spent
    return tuple(seconds)


def predict_steps(steps: Sequence[StepCost], profile: DeviceProfile,
                  dtype: str) -> PredictedTime:
    """The predicted time of costed steps (see the module).

    Raises:
        PlanningError: The profile has no rate for ``dtype``.
    """
    phases = {"forward": 0.0, "backward": 0.0}
    for step, seconds in zip(steps, step_times(steps, profile, dtype), strict=True):
        phases[step.phase] += seconds
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
