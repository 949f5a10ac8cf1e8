"""Refuse ``--repeats`` and ``--warmup`` (and a case's ``repeats``) that could never finish.

Every timed phase makes at least ``warmup + repeats`` calls, each call costs at least a
dispatch, and on the cpu at least its FLOPs at the rate the runs' refusals assume
(:data:`einsum_analyze.execution.CPU_FLOPS_PER_S`); a run whose one training step is
already beyond the cpu's limit is skipped by the runs themselves and not counted here.
When that lower bound on the runs' total time is beyond :data:`MAX_TOTAL_S`, the count
is refused before anything runs, with ``--force`` to insist. A bound, not a prediction:
the real runs take longer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import PlanningError
from ..render.formatting import format_count, format_seconds

if TYPE_CHECKING:
    from ..report.report import Report

__all__ = ["MAX_TOTAL_S", "MIN_CALL_S", "check_counts"]

MAX_TOTAL_S = 3600.0
"""A lower bound on the runs' time beyond which the counts are refused (one hour)."""

MIN_CALL_S = 5e-6
"""The least a timed call costs on any device: one dispatch (5 us)."""

_BASELINES = 2  # torch-autograd and opt_einsum-torch run beside our strategies


def check_counts(repeats: int, warmup: int, *, force: bool, report: Report | None = None,
                 on_cpu: bool = False, where: str = "--repeats and --warmup") -> None:
    """Raise :class:`PlanningError` when the counts' least total time is beyond reason.

    Args:
        repeats: Timed blocks per phase.
        warmup: Untimed calls first.
        force: ``--force``: never refuse.
        report: The analysis, once it exists: its strategies are counted, and on the
            cpu their FLOPs bound each call; before it, one strategy is assumed.
        on_cpu: Whether the runs include the cpu.
        where: The options or keys named in the message.

    Example:
        >>> check_counts(10**20, 3, force=False)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        einsum_analyze.errors.PlanningError: --repeats and --warmup: 1.00e20 calls per ...
        >>> check_counts(10**20, 3, force=True)
    """
    if force:
        return
    calls = repeats + warmup
    per_call = [MIN_CALL_S]
    if report is not None:
        from ..execution import CPU_FLOPS_PER_S, CPU_TIME_LIMIT_S

        per_call = [max(MIN_CALL_S, (s.forward_flops + s.backward_flops) / CPU_FLOPS_PER_S
                        if on_cpu else MIN_CALL_S) for s in report.strategies]
        # A run whose one step is beyond the cpu's limit is skipped, whatever the counts.
        per_call = [t for t in per_call if force or t <= CPU_TIME_LIMIT_S]
        per_call += [max(per_call, default=MIN_CALL_S)] * _BASELINES
    # Forward and backward are each timed: two phases of `calls` calls per run.
    total_s = 2 * calls * sum(per_call)
    if total_s <= MAX_TOTAL_S:
        return
    bound = (f"{total_s / 3600:.3g} hours" if total_s >= 3600 * 1000
             else format_seconds(total_s))
    from ..execution import CPU_FLOPS_PER_S

    each = (f"of at least {format_seconds(MIN_CALL_S)} each"
            if report is None or not on_cpu
            else f"(each at least its FLOPs at {CPU_FLOPS_PER_S:.0e} FLOP/s on the cpu)")
    raise PlanningError(
        f"{where}: {format_count(calls)} calls per phase {each} take at least {bound}; "
        "lower them, or add --force to run anyway"
    )
