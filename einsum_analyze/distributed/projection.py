"""A step's time on N devices, predicted from parts measured apart (pure arithmetic).

Nothing of the distributed step itself enters the prediction, so that comparing it with
the measured step checks the model (docs/distributed.md, "The projection checked"):

- ``single_s``: one device running every slice (the run's baseline);
- the costliest device's share of the slice costs under the assignment;
- the collectives' costs, measured alone in the same processes before the steps
  (:class:`CollectiveCosts`: a fixed cost per call and a bandwidth, for all-reduce and
  broadcast, and a barrier's cost);
- the step's collectives (:class:`.comm.CommPlan`), whose bytes follow from the sizes.

The model::

    T_N = single_s * share_N + barriers + sum over calls (latency + bytes received / bandwidth)

where a ring all-reduce of ``B`` bytes receives ``2 (N - 1) / N * B`` per device and a
broadcast ``B`` on every device but its source. Under ``overlap`` only the calls issued
after the last slice count (the others travel while slices run), and one barrier.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .comm import FINAL, CommPlan

__all__ = ["CollectiveCosts", "StepPrediction", "fit_collective_costs", "predict_step"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectiveCosts:
    """What collectives cost on the run's devices (measured alone).

    Attributes:
        latency_s: Seconds of one call of each kind (``all_reduce``, ``broadcast``) on
            one element.
        bytes_per_s: Bytes received per second by one device, by kind.
        barrier_s: Seconds of one barrier.
    """

    latency_s: Mapping[str, float]
    bytes_per_s: Mapping[str, float]
    barrier_s: float

    def to_dict(self) -> dict[str, object]:
        """Plain data for JSON."""
        return {"latency_s": dict(self.latency_s), "bytes_per_s": dict(self.bytes_per_s),
                "barrier_s": self.barrier_s}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CollectiveCosts:
        """The inverse of :meth:`to_dict` (JSON numbers; an infinite rate as ``Infinity``)."""
        return cls(latency_s={str(k): float(v) for k, v in data["latency_s"].items()},
                   bytes_per_s={str(k): float(v) for k, v in data["bytes_per_s"].items()},
                   barrier_s=float(data["barrier_s"]))


def fit_collective_costs(samples: Mapping[str, Sequence[tuple[int, float]]],
                         barrier_s: float) -> CollectiveCosts:
    """Latency and bandwidth of each kind from ``(bytes received, seconds)`` samples.

    The smallest sample gives the latency; the line through it and the largest the
    bandwidth (infinite when the largest is no slower).

    Example:
        >>> c = fit_collective_costs({"all_reduce": [(8, 1e-4), (8008, 2e-4)]}, 5e-5)
        >>> round(c.bytes_per_s["all_reduce"])
        80000000
    """
    latency: dict[str, float] = {}
    rate: dict[str, float] = {}
    for kind, points in samples.items():
        ordered = sorted(points)
        (small_b, small_s), (large_b, large_s) = ordered[0], ordered[-1]
        latency[kind] = small_s
        slope = (large_s - small_s) / (large_b - small_b) if large_b > small_b else 0.0
        rate[kind] = 1.0 / slope if slope > 0 else float("inf")
    return CollectiveCosts(latency_s=latency, bytes_per_s=rate, barrier_s=barrier_s)


def communication_s(plan: CommPlan, costs: CollectiveCosts, rank: int, *,
                    final_only: bool = False) -> float:
    """Predicted seconds of ``rank``'s collectives in a step (calls in flight add up)."""
    n = plan.devices
    total = 0.0
    for t in plan.transfers:
        if final_only and t.round != FINAL:
            continue
        nbytes = t.elements * plan.itemsize
        received = (2 * (n - 1) / n * nbytes if t.kind == "all_reduce"
                    else 0.0 if t.source == rank else nbytes)
        total += costs.latency_s[t.kind] + received / costs.bytes_per_s[t.kind]
    return total


@dataclass(frozen=True, slots=True, kw_only=True)
class StepPrediction:
    """The model's step, and its two parts.

    Attributes:
        step_s: Seconds of one step (the slowest rank's compute and collectives, and
            the barriers).
        compute_s: The costliest rank's share of ``single_s``.
        after_compute_s: The rest: collectives (those left after the slices, under
            ``overlap``) and barriers, of the slowest rank.
    """

    step_s: float
    compute_s: float
    after_compute_s: float


def predict_step(*, single_s: float, costs: Sequence[float],
                 assignment: Sequence[Sequence[int]], plan: CommPlan,
                 collectives: CollectiveCosts) -> StepPrediction:
    """The model's step (see the module).

    Args:
        single_s: One device running every slice.
        costs: Every slice's cost (FLOPs).
        assignment: Each rank's slices.
        plan: The step's collectives for this assignment.
        collectives: Their measured costs.
    """
    total = float(sum(costs)) or 1.0
    overlap = plan.communication == "overlap"
    barriers = (1 if overlap else 2) * collectives.barrier_s if plan.devices > 1 else 0.0
    slowest = heaviest = 0.0
    for rank, part in enumerate(assignment):
        compute = single_s * sum(costs[s] for s in part) / total
        comm = (communication_s(plan, collectives, rank, final_only=overlap)
                if plan.devices > 1 else 0.0)
        slowest = max(slowest, compute + comm)
        heaviest = max(heaviest, compute)
    step = slowest + barriers
    return StepPrediction(step_s=step, compute_s=heaviest, after_compute_s=step - heaviest)
