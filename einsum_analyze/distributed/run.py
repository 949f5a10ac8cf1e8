"""A sliced plan on N devices: assign, launch, gather the figures into one record."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .assign import choose_assignment
from .contract import DistributedJob
from .devices import DeviceList
from .launch import RankOutcome, error_rank, free_port, launch
from .worker import rank_main

__all__ = ["DeviceFigures", "DistributedResult", "run_distributed", "stall_limit_s"]

CAUTIOUS_FLOPS_PER_S = {"cpu": 1e8, "cuda": 1e10}
"""A rate every device of the kind beats on a sliced step (a 2-core shared cpu ran
tn18 scaled by 1/8 at 6e8 FLOP/s per process): the stall limit's unit of work."""

STALL_FACTOR = 4.0
"""The stall limit: this many times the predicted seconds of the largest unit of work."""


def stall_limit_s(job: DistributedJob, *, is_cuda: bool) -> float:
    """Seconds without progress (or heartbeat) after which a rank is named hung.

    The largest unit of work between two progress marks is rank 0's running every slice
    (the baseline, the oracle of the same contraction, the profiled step): its FLOPs at
    :data:`CAUTIOUS_FLOPS_PER_S`, times :data:`STALL_FACTOR`, and at least the job's
    ``stall_floor_s``.

    Example:
        ``1e9`` FLOPs of slices on cpu: ``max(30, 4 * 1e9 / 1e8)`` = 40 s.
    """
    flops = float(sum(job.runner.slice_costs()))
    rate = CAUTIOUS_FLOPS_PER_S["cuda" if is_cuda else "cpu"]
    return max(job.stall_floor_s, STALL_FACTOR * flops / rate)


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceFigures:
    """One device's share of the step (medians over the timed steps).

    Attributes:
        rank: Its process's rank.
        device: ``cuda:1``, ``cpu:0``, ...
        slices: The slice numbers it ran.
        compute_s: Its slices, forward and backward.
        wait_s: Waiting for the slowest device before the reduction.
        communication_s: The all-reduce of the output and gradients.
        peak_bytes_measured: The allocator's peak of its slices and the reduction,
            inputs included.
        peak_bytes_predicted: The model's peak of its slices, inputs included.
        error: Why the rank failed; None when it ran.
    """

    rank: int
    device: str
    slices: tuple[int, ...]
    compute_s: float | None = None
    wait_s: float | None = None
    communication_s: float | None = None
    peak_bytes_measured: int | None = None
    peak_bytes_predicted: int | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """One entry of ``distributed.per_device`` in the JSON report."""
        return {"rank": self.rank, "device": self.device, "slices": list(self.slices),
                "compute_s": self.compute_s, "wait_s": self.wait_s,
                "communication_s": self.communication_s,
                "peak_bytes_measured": self.peak_bytes_measured,
                "peak_bytes_predicted": self.peak_bytes_predicted, "error": self.error}


@dataclass(frozen=True, slots=True, kw_only=True)
class DistributedResult:
    """A sliced training step spread over devices, against one device running it all.

    Attributes:
        devices: The devices, rank order.
        backend: ``nccl`` or ``gloo``.
        slice_count: Slices in the plan.
        per_device: Each device's figures.
        step_s: Median seconds of one distributed step (rank 0: compute, wait, reduce).
        single_device: Rank 0's device running every slice alone: ``device``,
            ``seconds``, ``peak_bytes_measured``, ``peak_bytes_predicted``.
        reduce_bytes: Bytes of the output and gradient buffers (what an all-reduce of
            every buffer sums).
        communication: How they crossed: ``all-reduce``, ``gather`` or ``overlap``.
        moved_bytes: The most bytes one device received per step (:mod:`.comm`).
        calls: Collective calls per step.
        collectives: Rank 0's collectives timed alone (``calibrate``), or None.
        compared: The job's other ways of communicating (``compare``), their steps
            interleaved with this one's in the same processes.
        max_grad_error: Largest relative error of the reduced gradients against the
            float64 oracle.
        output_error: Relative error of the reduced output.
        failed: Whether a rank failed (its error is in ``per_device``).
    """

    devices: tuple[str, ...]
    backend: str
    slice_count: int
    per_device: tuple[DeviceFigures, ...]
    step_s: float | None = None
    single_device: dict[str, Any] | None = None
    reduce_bytes: int | None = None
    communication: str | None = None
    moved_bytes: int | None = None
    calls: int | None = None
    collectives: dict[str, Any] | None = None
    max_grad_error: float | None = None
    output_error: float | None = None
    failed: bool = False
    timings: dict[int, Any] = field(default_factory=dict)
    compared: tuple[DistributedResult, ...] = ()

    @property
    def speedup(self) -> float | None:
        """One device's seconds for every slice over the distributed step's."""
        if self.single_device is None or not self.step_s:
            return None
        return float(self.single_device["seconds"]) / self.step_s

    @property
    def efficiency(self) -> float | None:
        """Speedup per device: 1.0 is perfect scaling."""
        speedup = self.speedup
        return None if speedup is None else speedup / len(self.devices)

    @property
    def errors(self) -> tuple[str, ...]:
        """``rank 1 (cpu:1): ValueError: ...`` for every failed rank, first cause first."""
        failed = sorted((d for d in self.per_device if d.error is not None),
                        key=lambda d: (error_rank(d.error), d.rank))
        return tuple(f"rank {d.rank} ({d.device}): {d.error}" for d in failed)

    @property
    def failure(self) -> str | None:
        """One line for a failed run: the rank that caused it first, then the others.

        ``rank 1 (cpu:1): killed by SIGKILL; then rank 0 (cpu:0): stopped: rank 1
        failed``; None when every rank ran.
        """
        errors = self.errors
        if not errors:
            return None
        return errors[0] + ("; then " + "; ".join(errors[1:]) if errors[1:] else "")

    def to_dict(self) -> dict[str, Any]:
        """The ``distributed`` section of the JSON report (docs/schema.md)."""
        return {
            "devices": list(self.devices),
            "backend": self.backend,
            "slices": self.slice_count,
            "failed": self.failed,
            "errors": list(self.errors),
            "step_s": self.step_s,
            "single_device": self.single_device,
            "speedup": self.speedup,
            "efficiency": self.efficiency,
            "reduce_bytes": self.reduce_bytes,
            "communication": self.communication,
            "moved_bytes": self.moved_bytes,
            "calls": self.calls,
            "collectives": self.collectives,
            "max_grad_error": self.max_grad_error,
            "output_error": self.output_error,
            "per_device": [d.to_dict() for d in self.per_device],
            "compared": [c.to_dict() for c in self.compared],
        }


def run_distributed(job: DistributedJob, devices: DeviceList, *,
                    assignment: Sequence[Sequence[int]] | None = None) -> DistributedResult:
    """Run the job's slices over ``devices``, one process each; never raises for a rank.

    Args:
        job: The plan's runner, operands' description, timing and checking options.
        devices: From :func:`.devices.parse_devices`.
        assignment: Slices per rank; default :func:`.assign.choose_assignment` by the
            runner's slice costs (runs of consecutive slices where they balance as
            well as longest-first does).

    Returns:
        The figures; ``failed`` with each rank's error when a rank raised, exited or
        was killed (every process is gone by then).

    Raises:
        einsum_analyze.errors.PlanningError: An ``assignment`` that is not one list per
            device covering every slice once.
    """
    names = devices.devices
    if assignment is None:
        assignment = choose_assignment(job.runner.slice_costs(), len(names))
    parts = tuple(tuple(part) for part in assignment)
    _check_assignment(parts, len(names), job.runner.slice_count)
    init = f"tcp://127.0.0.1:{free_port()}"
    outcomes = launch(rank_main, [(job, names, devices.backend, init, parts)] * len(names),
                      timeout_s=job.timeout_s,
                      stall_s=stall_limit_s(job, is_cuda=devices.is_cuda))
    failed = any(o.error is not None for o in outcomes)
    first = outcomes[0].result or {}
    single = first.get("single")
    if single is not None:
        single = {k: v for k, v in single.items() if not k.endswith("_all")}
    compared = tuple(
        _result(job, devices, parts, outcomes, mode, single, failed)
        for mode in dict.fromkeys(job.compare) if mode != job.communication)
    primary = _result(job, devices, parts, outcomes, None, single, failed)
    return replace(primary, compared=compared, collectives=first.get("collectives"),
                   output_error=first.get("output_error"))


def _result(job: DistributedJob, devices: DeviceList, parts: Sequence[tuple[int, ...]],
            outcomes: Sequence[RankOutcome], mode: str | None, single: dict[str, Any] | None,
            failed: bool) -> DistributedResult:
    """The figures of one way of communicating (None: the job's own), every rank's."""

    def read(outcome: RankOutcome) -> dict[str, Any]:
        got = outcome.result or {}
        return got if mode is None else dict(got.get("modes", {}).get(mode, {}))

    per_device: list[DeviceFigures] = []
    for outcome, device, part in zip(outcomes, devices.devices, parts, strict=True):
        got = read(outcome)
        per_device.append(DeviceFigures(
            rank=outcome.rank, device=device, slices=part,
            compute_s=got.get("compute_s"), wait_s=got.get("wait_s"),
            communication_s=got.get("communication_s"),
            peak_bytes_measured=got.get("peak_bytes_measured"),
            peak_bytes_predicted=got.get("peak_bytes_predicted"), error=outcome.error))
    first = read(outcomes[0])
    return DistributedResult(
        devices=devices.devices, backend=devices.backend, slice_count=job.runner.slice_count,
        per_device=tuple(per_device), step_s=None if failed else first.get("step_s"),
        single_device=None if failed else single,
        reduce_bytes=first.get("reduce_bytes"), communication=first.get("communication"),
        moved_bytes=max((read(o).get("moved_bytes") or 0) for o in outcomes) or None,
        calls=first.get("calls"), max_grad_error=first.get("max_grad_error"), failed=failed,
        timings={o.rank: {k: v for k, v in read(o).items() if k.endswith("_all")}
                 for o in outcomes},
    )


def _check_assignment(parts: Sequence[Sequence[int]], devices: int, count: int) -> None:
    """Each device one list, every slice in exactly one: else the sums would be wrong.

    Raises:
        einsum_analyze.errors.PlanningError: Another assignment (before any process starts).
    """
    from ..errors import PlanningError

    given = sorted(slice_id for part in parts for slice_id in part)
    if len(parts) != devices or given != list(range(count)):
        raise PlanningError(f"assignment {[list(p) for p in parts]!s:.80}: give each of the "
                            f"{devices} devices a list of slices, every slice 0 to "
                            f"{count - 1} in exactly one")
