"""Which device runs which slices, and what N devices should gain: pure arithmetic.

No torch here: the assignment and the efficiency model read slice costs and measured
seconds only, so the analysis and the docs' projection script can use them anywhere.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Projection", "assign_slices", "project_efficiency"]


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

    The model (docs/distributed.md)::

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
