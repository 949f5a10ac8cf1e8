"""What the host costs besides the kernels: our executor's steps, torch.einsum's calls.

A step's kernels are priced by their work (:mod:`.time_model`); around them the host runs
Python that costs the same at any size, and on a small step it is most of the time:

- our executor (:mod:`einsum_analyze.backends.torch_kernels`): each step's compiled
  function (its views, the ``out=`` buffer, the free that follows) costs
  ``forward_step_s`` or ``backward_step_s``, and each phase's run of the compiled list
  (``run_compiled``: ``no_grad``, the live tensors' dictionary) ``forward_run_s`` or
  ``backward_run_s``, and each kind of step other than a product (``forward_kind_s``,
  ``backward_kind_s``: its code's first run in the call);
- torch.einsum under autograd (the ``torch-autograd`` model): the forward call (the
  leaves, the equation's parsing, opt_einsum's path search on three operands or more,
  every pairwise step's permutes, reshapes and autograd nodes) costs
  ``torch_forward``'s seconds at the call's number of operands, interpolated between
  measured points (:func:`~.time_model.interpolate`); the backward call
  (``autograd.grad``'s engine and its nodes: each product's backward and the views'
  around it) costs ``torch_backward``'s seconds at its number of gradient contractions,
  interpolated the same way: a call's fixed cost outweighs its nodes' up to a few
  contractions, which no line through the chains' figures follows. Without those points
  (a profile file may leave them out) it costs ``torch_backward_s`` plus ``torch_node_s``
  per gradient contraction, the line through them.

The phases differ because runs time them differently (:mod:`einsum_analyze.backends.timing`):
a forward call in blocks of many calls, its code and data warm in the caches; a backward
call one a block, after its setup and the other runs' blocks, cold. Every figure is beyond
the kernels themselves: the calibration (:mod:`einsum_analyze.backends.host_calibration`)
times chains of tiny contractions as runs are timed and takes away the time model's own
price of their kernels, so the model charges each second once.

Analysis only: no torch, no allocation.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import PlanningError

__all__ = ["CPU_HOST", "GPU_HOST", "HostCosts", "host_from_dict", "interpolate"]


def interpolate(points: Sequence[tuple[float, float]], work: float) -> float:
    """Seconds at ``work`` from ascending ``(work, seconds)`` points.

    Log-log between the points; the first point's seconds below them, proportional
    beyond the last (the time model's kernel classes, torch's calls).

    Example:
        >>> round(interpolate(((1e3, 1e-6), (1e5, 1e-4)), 1e4), 12), interpolate(((1e3, 1e-6),), 1)
        (1e-05, 1e-06)
    """
    first_work, first_s = points[0]
    if work <= first_work:
        return first_s
    for (low_w, low_s), (high_w, high_s) in zip(points, points[1:], strict=False):
        if work <= high_w:
            fraction = math.log(work / low_w) / math.log(high_w / low_w)
            return math.exp(math.log(low_s) + fraction * math.log(high_s / low_s))
    last_work, last_s = points[-1]
    return last_s * work / last_work


@dataclass(frozen=True, slots=True, kw_only=True)
class HostCosts:
    """Seconds the host adds to a plan's kernels (see the module).

    Attributes:
        forward_step_s: Our executor, each forward step beyond its kernels.
        backward_step_s: Our executor, each backward step beyond its kernels.
        forward_run_s: Our executor, the forward's run of its steps.
        backward_run_s: Our executor, the backward's call beyond its steps (a
            calibration times a real backward call, as runs time theirs).
        forward_kind_s: Our executor, each kind of forward step other than a product
            (a broadcast product, a sum, an unreduce, a copy: code run for the first
            time in the call, beside the products the per-step costs price).
        backward_kind_s: The same in backward, where a call starts cold.
        forward_label_s: Our executor, each label of a forward step's terms (inputs
            and output: ``ab,bc->ac`` has 6), beyond ``forward_step_s``.
        backward_label_s: The same in backward.
        dispatch_s: Our executor on an asynchronous device (a GPU), each kernel's
            dispatch beyond the profile's ``launch_s``, in the host's side of a phase.
            A calibration leaves it at 0: its chains' steps, priced against
            ``launch_s`` a kernel there, carry what our kernels' calls cost beyond it
            (a profile file may set it).
        torch_forward: torch.einsum's forward call under autograd beyond its kernels:
            ascending ``(operands, seconds)`` points (empty: none).
        torch_node_s: torch autograd, each gradient contraction beyond its kernel.
        torch_backward_s: torch autograd, each backward call (``autograd.grad``).
        torch_backward: torch autograd's backward call beyond its kernels: ascending
            ``(gradient contractions, seconds)`` points (empty: the line of
            ``torch_backward_s`` and ``torch_node_s`` instead).
    """

    forward_step_s: float = 0.0
    backward_step_s: float = 0.0
    forward_run_s: float = 0.0
    backward_run_s: float = 0.0
    forward_kind_s: float = 0.0
    backward_kind_s: float = 0.0
    forward_label_s: float = 0.0
    backward_label_s: float = 0.0
    dispatch_s: float = 0.0
    torch_forward: tuple[tuple[float, float], ...] = ()
    torch_node_s: float = 0.0
    torch_backward_s: float = 0.0
    torch_backward: tuple[tuple[float, float], ...] = ()

    def backward_call_s(self, contractions: int) -> float:
        """The backward call of torch autograd at ``contractions`` gradient contractions.

        Example:
            >>> round(HostCosts(torch_backward=((2, 4e-4), (4, 5e-4))).backward_call_s(3), 6)
            0.000456
            >>> HostCosts(torch_backward_s=1e-4, torch_node_s=2e-5).backward_call_s(3)
            0.00016
        """
        if self.torch_backward:
            return interpolate(self.torch_backward, max(1, contractions))
        return self.torch_backward_s + contractions * self.torch_node_s

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (a profile's ``host``)."""
        return {
            "forward_step_s": self.forward_step_s,
            "backward_step_s": self.backward_step_s,
            "forward_run_s": self.forward_run_s,
            "backward_run_s": self.backward_run_s,
            "forward_kind_s": self.forward_kind_s,
            "backward_kind_s": self.backward_kind_s,
            "forward_label_s": self.forward_label_s,
            "backward_label_s": self.backward_label_s,
            "dispatch_s": self.dispatch_s,
            "torch_forward": [list(point) for point in self.torch_forward],
            "torch_node_s": self.torch_node_s,
            "torch_backward_s": self.torch_backward_s,
            "torch_backward": [list(point) for point in self.torch_backward],
        }


_SECONDS = ("forward_step_s", "backward_step_s", "forward_run_s", "backward_run_s",
            "forward_kind_s", "backward_kind_s", "forward_label_s", "backward_label_s",
            "dispatch_s", "torch_node_s", "torch_backward_s")


def _seconds(value: Any, what: str, origin: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not math.isfinite(value) or value < 0:
        raise PlanningError(f"--roofline {origin}: host.{what} must be a number of seconds "
                            f"at least 0, not {value!r:.40}")
    return float(value)


_POINTS = {"torch_forward": "operands", "torch_backward": "contractions"}
"""The host's point lists and what each point's first number counts."""


def _points(value: Any, key: str, origin: str) -> tuple[tuple[float, float], ...]:
    what, counts = f"host.{key}", _POINTS[key]
    if not isinstance(value, list):
        raise PlanningError(f"--roofline {origin}: {what} must be a list of "
                            f"[{counts}, seconds]")
    points: list[tuple[float, float]] = []
    for point in value:
        if not (isinstance(point, list) and len(point) == 2):
            raise PlanningError(f"--roofline {origin}: {what} must be a list of "
                                f"[{counts}, seconds], not {point!r:.40}")
        count = _seconds(point[0], f"{key} {counts}", origin)
        seconds = _seconds(point[1], f"{key} seconds", origin)
        if count <= 0 or seconds <= 0 or (points and count <= points[-1][0]):
            raise PlanningError(f"--roofline {origin}: {what}'s {counts} must be above 0 "
                                "and ascending, its seconds above 0")
        points.append((count, seconds))
    return tuple(points)


def host_from_dict(data: Any, origin: str) -> HostCosts:
    """A profile's ``host`` object; every field optional (0, or no points, when absent).

    Raises:
        PlanningError: Not an object, or a field that is not seconds at least 0.

    Example:
        >>> host_from_dict({"forward_step_s": 1e-5}, "x").forward_step_s
        1e-05
    """
    if not isinstance(data, dict):
        raise PlanningError(f"--roofline {origin}: host must be a JSON object")
    found: dict[str, Any] = {key: _seconds(data[key], key, origin)
                             for key in _SECONDS if key in data}
    for key in _POINTS:
        if key in data:
            found[key] = _points(data[key], key, origin)
    return HostCosts(**found)


CPU_HOST = HostCosts(
    forward_step_s=1e-6, backward_step_s=4e-6, forward_run_s=2e-6, backward_run_s=4e-5,
    forward_kind_s=1.5e-6, backward_kind_s=2e-5, forward_label_s=5e-7, backward_label_s=1e-6,
    torch_forward=((2, 1.4e-5), (3, 1e-4), (4, 2e-4), (6, 1e-3), (9, 5e-4), (17, 9e-4)),
    torch_node_s=3.5e-5, torch_backward_s=1.5e-4)
"""Nominal host costs: one core of a server cpu running torch 2.13 from Python (rounded
from calibrations of the project's 2-core machine, docs/method.md); an order of
magnitude, as the nominal rates are."""

GPU_HOST = HostCosts(
    forward_step_s=1e-6, backward_step_s=1e-6, forward_run_s=1.9e-6, backward_run_s=2.6e-5,
    forward_kind_s=4.1e-6, backward_kind_s=8.9e-6, forward_label_s=1.4e-6,
    backward_label_s=1.3e-6,
    torch_forward=((2, 4.4e-5), (3, 2.46e-4), (4, 4.63e-4), (6, 2.17e-3), (9, 1.05e-3),
                   (17, 2.08e-3)),
    torch_node_s=1.1e-4, torch_backward_s=3.4e-5,
    torch_backward=((2, 2.58e-4), (4, 4.92e-4), (6, 6.28e-4), (10, 1.042e-3),
                    (16, 1.409e-3), (32, 3.633e-3)))
"""Nominal host costs beside a GPU: an H200's host with torch 2.11 and CUDA 13.0, each
figure the median of three calibrations on three leases, every backward timed warm
(docs/results/gpu_2026-12-02f/final, gpu_2026-12-02h/s10a, gpu_2026-12-04/s11b, the
``timemodel.json`` of each); a step's own cost came out at 0 beyond its kernels' dispatch
on all three, and 1 us stands in; ``torch_backward_s`` and ``torch_node_s`` are a line
through the backward call's points (they stand in only without them). The cold
calibration it replaces charged a backward run 120 us and a torch.einsum backward call
of two gradients 790 us (26 and 258 us warm): on those leases' runs above 0.2 ms the
nominal H200 profile now predicts within [0.75, 1.33] 11, 15 and 13 times of 23, 24 and
22 (9, 1 and 4 before; docs/results/gpu_2026-12-04/replay_nominal.py). A GPU's host
launches and synchronises, so its figures are above the cpu's; each kernel's launch
itself is the profile's ``launch_s``."""
