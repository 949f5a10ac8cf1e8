"""Which device runs which slices, and what N devices should gain: pure arithmetic.

No torch here: the assignment and the efficiency model read slice costs and measured
seconds only, so the analysis and the docs' projection script can use them anywhere.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Projection", "assign_contiguous", "assign_slices", "choose_assignment",
           "project_efficiency"]


def assign_slices(costs: Sequence[float], devices: int) -> tuple[tuple[int, ...], ...]:
    """Spread slices over ``devices`` so that the costliest device carries the least.

    Longest processing time first: the slices in decreasing cost, each to the device
    with the least load so far (ties: the lower rank). Within 4/3 of the best possible
    makespan; exact when the costs are equal (every device gets ``len // N`` or one
    more). Nothing depends on the number of devices beyond this loop.

    Args:
        costs: The cost (FLOPs, or any additive measure) of every slice, by slice number.
        devices: How many devices share them (at least 1).

    Returns:
        One sorted tuple of slice numbers per device, rank order; a device may get none
        when there are fewer slices than devices.

    Raises:
        ValueError: No device, or a negative cost.
    """
    if devices < 1:
        raise ValueError(f"slices need at least one device, got {devices}")
    if any(cost < 0 for cost in costs):
        raise ValueError("slice costs cannot be negative")
    order = sorted(range(len(costs)), key=lambda s: (-costs[s], s))
    loads = [(0.0, rank) for rank in range(devices)]
    owned: list[list[int]] = [[] for _ in range(devices)]
    for s in order:
        load, rank = heapq.heappop(loads)
        owned[rank].append(s)
        heapq.heappush(loads, (load + float(costs[s]), rank))
    return tuple(tuple(sorted(slices)) for slices in owned)


def _makespan(costs: Sequence[float], parts: Sequence[Sequence[int]]) -> float:
    return max((sum(float(costs[s]) for s in part) for part in parts), default=0.0)


def assign_contiguous(costs: Sequence[float], devices: int) -> tuple[tuple[int, ...], ...]:
    """Runs of consecutive slices, one per device, the costliest as light as possible.

    Consecutive slices share their outer chunks (slices are numbered row-major), so a
    device's slices write whole parts of the buffers that hold an outer sliced index:
    those parts then have one owner and are gathered, not summed (:mod:`.comm`). The
    bound is found by bisection on the costliest device's load (each device takes slices
    in order while they fit under it); the runs cut nearest to even shares of the total
    are kept where they stay under that bound, so that 7 equal slices on 3 devices go
    2, 3, 2 rather than 3, 3, 1.

    Example:
        >>> assign_contiguous([1, 1, 1, 1, 1, 1], 2)
        ((0, 1, 2), (3, 4, 5))
        >>> assign_contiguous([4, 1, 1, 1, 1], 2)
        ((0,), (1, 2, 3, 4))
    """
    if devices < 1:
        raise ValueError(f"slices need at least one device, got {devices}")
    if any(cost < 0 for cost in costs):
        raise ValueError("slice costs cannot be negative")

    def fill(bound: float) -> list[list[int]] | None:
        parts: list[list[int]] = [[]]
        load = 0.0
        for s, cost in enumerate(costs):
            if parts[-1] and load + cost > bound:
                if len(parts) == devices:
                    return None
                parts.append([])
                load = 0.0
            parts[-1].append(s)
            load += float(cost)
        return parts + [[] for _ in range(devices - len(parts))]

    low = max((float(c) for c in costs), default=0.0)
    high = float(sum(costs))
    best = fill(high)
    assert best is not None
    for _ in range(64):
        if high - low <= 1e-12 * max(high, 1.0):
            break
        middle = (low + high) / 2
        parts = fill(middle)
        if parts is None:
            low = middle
        else:
            best, high = parts, middle
    even = _even_runs(costs, devices)
    if _makespan(costs, even) <= _makespan(costs, best) + 1e-12 * max(high, 1.0):
        best = even
    return tuple(tuple(part) for part in best)


def _even_runs(costs: Sequence[float], devices: int) -> list[list[int]]:
    """Runs cut where the running total is nearest to ``d / devices`` of the whole."""
    prefix = [0.0]
    for cost in costs:
        prefix.append(prefix[-1] + float(cost))
    cuts = [0]
    for d in range(1, devices):
        target = prefix[-1] * d / devices
        cuts.append(min(range(cuts[-1], len(costs) + 1),
                        key=lambda j: (abs(prefix[j] - target), j)))
    cuts.append(len(costs))
    return [list(range(a, b)) for a, b in zip(cuts, cuts[1:], strict=False)]


def choose_assignment(costs: Sequence[float], devices: int) -> tuple[tuple[int, ...], ...]:
    """Consecutive runs where their costliest device carries no more than LPT's, else LPT.

    Equal slices split evenly both ways, so they get runs, and so less communication;
    unequal ones keep :func:`assign_slices`' balance when runs would be worse.
    """
    runs = assign_contiguous(costs, devices)
    lpt = assign_slices(costs, devices)
    tolerance = 1e-9 * max(float(sum(costs)), 1.0)
    return runs if _makespan(costs, runs) <= _makespan(costs, lpt) + tolerance else lpt


@dataclass(frozen=True, slots=True, kw_only=True)
class Projection:
    """The step time and efficiency expected on N devices.

    Attributes:
        devices: N.
        step_s: Expected seconds of one step: the costliest device's compute plus the
            all-reduce of the output and gradients.
        speedup: One device's compute over ``step_s``.
        efficiency: ``speedup / N``.
    """

    devices: int
    step_s: float
    speedup: float
    efficiency: float


def project_efficiency(
    *,
    single_s: float,
    reduce_bytes: int,
    bus_bytes_per_s: float,
    devices: int,
    latency_s: float = 0.0,
    slice_costs: Sequence[float] | None = None,
) -> Projection:
    """Expected speedup and efficiency of the same slices on ``devices`` devices.

    The first model, whose fixed cost ``latency_s`` was fitted to the measured step, so
    that it gave back the run it came from; :func:`.projection.predict_step` predicts
    from parts measured apart instead (docs/distributed.md, "The projection checked")::

        T_N = single_s * max_load_share(N) + latency_s + 2 (N - 1) / N * B / bw
        speedup = single_s / T_N,  efficiency = speedup / N

    where ``max_load_share`` is the costliest device's share of the slice costs under
    :func:`assign_slices` (``1/N`` when the costs are equal and divide evenly), ``B``
    the bytes all-reduced (output and gradients) and ``bw`` the all-reduce's bus
    bandwidth, measured on two devices as ``B / comm_s`` (a ring all-reduce on 2 devices
    moves ``2 (N-1)/N B = B`` bytes per device).

    Args:
        single_s: Seconds one device takes for all the slices (measured).
        reduce_bytes: Bytes all-reduced per step.
        bus_bytes_per_s: Bus bandwidth of the all-reduce.
        devices: N.
        latency_s: Fixed cost per step (launch, barrier).
        slice_costs: Per-slice costs; None: N equal shares.
    """
    if devices < 1:
        raise ValueError(f"a projection needs at least one device, got {devices}")
    if slice_costs:
        total = float(sum(slice_costs)) or 1.0
        share = max(sum(slice_costs[s] for s in part)
                    for part in assign_slices(slice_costs, devices)) / total
    else:
        share = 1.0 / devices
    comm = 0.0 if devices == 1 else 2 * (devices - 1) / devices * reduce_bytes / bus_bytes_per_s
    step = single_s * share + (latency_s if devices > 1 else 0.0) + comm
    speedup = single_s / step if step > 0 else float(devices)
    return Projection(devices=devices, step_s=step, speedup=speedup,
                      efficiency=speedup / devices)
