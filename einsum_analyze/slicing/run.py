"""Run any subset of a sliced step's slices with torch (the distributed runs' unit of work).

torch is imported inside the functions: importing this module costs nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..model.lowering import lower_events
from ..model.planning import Plan
from .plan import SlicePlan
from .schedule import SlicedSchedule, sliced_schedule

__all__ = ["SliceRun", "run_slices"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SliceRun:
    """What :func:`run_slices` returns.

    Attributes:
        output: The full-size output holding the given slices' parts (and sums).
        gradients: Full-size gradient of each differentiated operand, by position,
            holding the given slices' parts (and sums).
        schedule: The schedule that ran.
    """

    output: Any
    gradients: Mapping[int, Any]
    schedule: SlicedSchedule


def run_slices(
    plan: Plan,
    slices: SlicePlan,
    operands: Sequence[Any],
    upstream: Any | None,
    grad: Iterable[int],
    *,
    slice_ids: Sequence[int] | None = None,
    strategy: str = "reverse",
    options: Mapping[str, Any] | None = None,
    fused: bool = True,
) -> SliceRun:
    """Run the slices ``slice_ids`` of the step on the operands' device.

    Args:
        plan: The unsliced forward plan (its equation's shapes are the operands').
        slices: What to slice.
        operands: Contiguous torch tensors, in operand order, on one device.
        upstream: The upstream gradient, contiguous in the output's labels (None when
            nothing is differentiated). It is not modified.
        grad: Operands that need a gradient.
        slice_ids: The slices to run (None: all).
        strategy: The per-slice strategy (``reverse`` or ``checkpoint``).
        options: Its options.
        fused: See :func:`~.schedule.sliced_schedule` (the results are the same).

    Returns:
        The :class:`SliceRun`: full-size output and gradients holding the sum over the
        given slices (see :mod:`einsum_analyze.slicing`).
    """
    from ..backends.torch_backend import run_compiled
    from ..backends.torch_kernels import compile_schedule

    wanted = tuple(sorted(set(grad)))
    itemsize = operands[0].element_size() if operands else 4
    schedule = sliced_schedule(plan, slices, wanted, itemsize=itemsize, strategy=strategy,
                               options=options, slice_ids=slice_ids, fused=fused)
    eq = plan.equation
    sizes = schedule.sizes(eq.size_dict)
    compiled = compile_schedule(lower_events(schedule.events, eq.terms, sizes), sizes)
    live: dict[str, Any] = {f"in{k}": t for k, t in enumerate(operands)}
    if wanted:
        if upstream is None:
            raise ValueError("an upstream gradient is needed for the gradients")
        live["upstream"] = upstream.clone()
    run_compiled(compiled.forward + compiled.backward, live)
    return SliceRun(output=live[compiled.final_output],
                    gradients={i: live[name] for i, name in schedule.gradients.items()},
                    schedule=schedule)
