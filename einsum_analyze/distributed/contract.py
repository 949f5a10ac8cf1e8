"""What a device needs from the sliced strategy, and what a distributed run is given.

The ``sliced`` strategy (:mod:`einsum_analyze.slicing`) plans the slices; this package
only spreads them. It relies on one promise, :class:`SliceRunner`: any subset of the
slices runs on one device into FULL-SIZE output and gradient buffers holding the sum
over that subset (an operand's sliced gradient lands in its own slice of the buffer,
zeros elsewhere; a sliced output index fills its slice of the output). Summing those
buffers over any partition of the slices (an ``all_reduce``) therefore gives the whole
output and gradients, whichever device ran which slice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = ["DistributedJob", "SliceRunner"]


@runtime_checkable
class SliceRunner(Protocol):
    """Runs a subset of a sliced plan's slices on one device.

    Picklable: it crosses to each rank's process.
    """

    @property
    def slice_count(self) -> int:
        """How many slices the plan has."""
        ...

    def slice_costs(self) -> Sequence[float]:
        """The cost (FLOPs) of each slice, to balance the devices."""
        ...

    def predicted_peak_bytes(self, slices: Sequence[int], *, is_cuda: bool) -> int | None:
        """The model's peak, inputs included, of running ``slices`` on one device.

        A runner that plans the step's collectives (``communication_plan``, as
        :class:`.schedule_runner.ScheduleSlices` does) also takes ``exchange=``, the
        plan, and counts its packs.
        """
        ...

    def run(self, slices: Sequence[int], operands: Sequence[Any], upstream: Any | None,
            grad: Sequence[int]) -> tuple[Any, Mapping[int, Any]]:
        """Forward (and, with ``upstream``, backward) of ``slices``.

        Returns:
            The full-size output holding the sum over ``slices``, and the full-size
            gradient of each operand in ``grad`` (empty without ``upstream``).
        """
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class DistributedJob:
    """Everything a rank needs, picklable: it draws the same seeded operands on every rank.

    Attributes:
        runner: The sliced plan's runner.
        text: The equation as the user wrote it (for the oracle).
        explicit: Its normalised explicit form.
        shapes: Operand shapes.
        output_shape: The output's shape.
        dtype: ``float32``, ...
        grad: Positions of the operands that need a gradient.
        seed: Seed of the operands and the upstream gradient.
        scales: Operand scales (low precision), or empty.
        repeats: Timed steps.
        warmup: Untimed steps first.
        check: Compare the reduced gradients with the float64 oracle (on rank 0).
        baseline: Also time rank 0's device running every slice alone.
        communication: How the buffers cross (:data:`.comm.COMMUNICATIONS`):
            ``all-reduce`` every buffer whole, ``gather`` the parts of sliced buffers
            from their owners, ``overlap`` the same while later slices run.
        compare: Other ways to time too, step by step interleaved with
            ``communication``'s in the same processes (before and after in one run).
        calibrate: Time the collectives alone before the steps (the projection's
            inputs, :mod:`.projection`).
        timeout_s: Seconds the run may take; also the process group's timeout.
        stall_floor_s: The least stall limit: a rank without a heartbeat, or making no
            progress while the others wait, this long is named hung (the limit grows
            with the predicted work, :func:`.run.stall_limit_s`). 30 s by default: rank 0's
            oracle and baseline cost seconds of Python however small the work, and a
            loaded shared runner stretched them past 10 s.
        fault: For tests only: ``(rank, how)`` makes that rank fail after joining the
            group, ``how`` one of ``raise``, ``exit``, ``kill``, ``hang`` (sleeps),
            ``stop`` (SIGSTOP), or ``backend``: the collective backend fails to join
            (a network interface that does not exist).
    """

    runner: SliceRunner
    text: str
    explicit: str
    shapes: tuple[tuple[int, ...], ...]
    output_shape: tuple[int, ...]
    dtype: str
    grad: tuple[int, ...]
    seed: int = 0
    scales: tuple[float, ...] = ()
    repeats: int = 5
    warmup: int = 1
    check: bool = True
    baseline: bool = True
    communication: str = "gather"
    compare: tuple[str, ...] = ()
    calibrate: bool = False
    timeout_s: float = 300.0
    stall_floor_s: float = 30.0
    fault: tuple[int, str] | None = field(default=None)
