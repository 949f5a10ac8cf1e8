"""``sliced``: the training step cut into slices of a few indices (docs/slicing.md).

Each slice runs forward then backward with the per-slice strategy (``reverse`` or
``checkpoint``) on its part of the operands and of the upstream gradient; the output
and the gradients are gathered into full-size buffers (:mod:`einsum_analyze.slicing`).
What to slice is given (``indices``: chunk length by label) or chosen to fit
``budget_bytes`` at the least FLOPs (:func:`~einsum_analyze.slicing.find_slices`).

Not modelled by default: it is for budgets. The search scores it when a budget is given
and no other plan fits (``fallback``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import PlanningError
from ..model.lowering import lower_events
from ..model.memory import simulate_memory
from ..model.parsing import parse_bytes
from ..model.planning import size_of
from ..strategies.common import ScheduleBuilder, StrategyInput
from ..strategies.registry import StrategySpec, get_strategy
from .finder import SliceChoice, find_slices, score_slices
from .plan import SlicePlan
from .schedule import PER_SLICE_STRATEGIES, SliceShape, sliced_schedule

__all__ = ["SPEC", "build_sliced", "parse_indices"]


def parse_indices(value: Any, size_dict: Mapping[str, int]) -> SlicePlan:
    """The ``indices`` option: ``{"n": 2}``, ``"n:2,b:1024"`` or ``"nb"`` (chunks of 1).

    Raises:
        PlanningError: A label the equation lacks or named twice, or a chunk that is not
            a positive integer.
    """
    chunks: dict[str, int] = {}
    if isinstance(value, Mapping):
        items = [(str(k), v) for k, v in value.items()]
    elif isinstance(value, str) and (":" in value or "," in value):
        items = []
        for part in value.split(","):
            label, _, chunk = part.strip().partition(":")
            items.append((label.strip(), chunk.strip() or "1"))
    elif isinstance(value, str):
        items = [(c, 1) for c in value]
    elif isinstance(value, (list, tuple)):
        items = [(str(c), 1) for c in value]
    else:
        raise PlanningError(f"sliced indices {value!r}: give labels with chunk lengths, "
                            "e.g. 'n:2,b:1024' or {'n': 2}")
    for label, chunk in items:
        number = _chunk(chunk)
        if number < 1 or len(label) != 1:
            raise PlanningError(f"sliced index {label!r}:{chunk!r}: give a label and a "
                                "positive chunk length, e.g. n:2")
        if label in chunks:
            raise PlanningError(f"sliced indices {value!r} name {label!r} twice")
        chunks[label] = number
    return SlicePlan.of(chunks, size_dict)


def _chunk(value: Any) -> int:
    """A chunk length as an int; 0 (refused by the caller) for anything else."""
    if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
        return 0
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return 0


def _budget(value: Any) -> int | None:
    """The ``budget_bytes`` option: None, or a size above 0 (bytes, or text like 2GiB)."""
    if value is None:
        return None
    number: Any = value
    if isinstance(value, str):
        try:
            number = parse_bytes(value)
        except ValueError as err:
            raise PlanningError(f"sliced budget_bytes: {err}") from err
    elif isinstance(value, float) and value == value and abs(value) != float("inf"):
        number = int(value)
    if isinstance(number, bool) or not isinstance(number, int) or number < 1:
        raise PlanningError(f"sliced budget_bytes {value!r} must be a size above 0 B, "
                            "such as 2GiB")
    return number


def build_sliced(given: StrategyInput) -> ScheduleBuilder:
    """The ``sliced`` strategy's builder."""
    plan = given.plan
    eq = plan.equation
    options = given.options
    per_slice = str(options["per_slice"])
    if per_slice not in PER_SLICE_STRATEGIES:
        raise PlanningError(f"a slice cannot run the {per_slice!r} strategy; choose one of: "
                            f"{', '.join(PER_SLICE_STRATEGIES)}")
    per_options = options["per_slice_options"]
    budget = _budget(options["budget_bytes"])
    grad = tuple(sorted(given.grad))
    fused = options["fused"]
    if not isinstance(fused, bool):
        raise PlanningError(f"sliced fused {fused!r}: give True or False")
    if options["indices"] is not None:
        slices = parse_indices(options["indices"], eq.size_dict)
        best = score_slices(plan, slices, grad, itemsize=given.itemsize, strategy=per_slice,
                            options=per_options, fused=fused,
                            upstream_copy=given.upstream_copy)
        choice = SliceChoice(best=best, fits=None if budget is None
                             else best.peak_bytes <= budget, budget_bytes=budget,
                             finder="given", evaluated=1, smallest=best)
    else:
        choice = find_slices(plan, grad, itemsize=given.itemsize, budget_bytes=budget,
                             strategy=per_slice, options=per_options,
                             finder=str(options["finder"]), fused=fused,
                             upstream_copy=given.upstream_copy)
    slices = choice.best.slices
    schedule = sliced_schedule(plan, slices, grad, itemsize=given.itemsize,
                               strategy=per_slice, options=per_options, fused=fused)
    builder = ScheduleBuilder(eq.size_dict)
    builder.events = list(schedule.events)
    builder.labels = dict(schedule.labels)
    builder.forward_flops = schedule.forward_flops
    builder.output_elements = plan.steps[-1].output_elements
    for shape in schedule.shapes:
        for operand, flops in shape.builder.operand_flops.items():
            builder.operand_flops[operand] = (builder.operand_flops.get(operand, 0)
                                              + flops * len(shape.slices))
        builder.shared_flops += shape.builder.shared_flops * len(shape.slices)
        builder.warnings.extend(f"sliced: {w}" for w in shape.builder.warnings
                                if f"sliced: {w}" not in builder.warnings)
    builder.details["slicing"] = _section(given, choice, schedule.shapes, per_slice)
    if choice.fits is False:
        builder.warnings.append(
            f"sliced: no slicing fits the budget of {budget:,} bytes (inputs included); the "
            f"smallest training peak it reaches is {choice.smallest.peak_bytes:,} bytes"
        )
    return builder


def _section(given: StrategyInput, choice: SliceChoice, shapes: Sequence[SliceShape],
             per_slice: str) -> dict[str, Any]:
    """The JSON ``slicing`` section."""
    plan = given.plan
    best = choice.best
    unsliced = get_strategy("reverse").build(StrategyInput(
        plan=plan, grad=given.grad, itemsize=given.itemsize,
        options=dict(get_strategy("reverse").options)))
    unsliced_flops = sum(e.flops for e in unsliced.events)
    per_slice_peak = 0
    for shape in shapes:
        eq = shape.plan.equation
        events = lower_events(shape.builder.events, eq.terms, eq.size_dict)
        memory = simulate_memory(
            events, input_elements=sum(size_of(t, eq.size_dict) for t in eq.terms),
            output_elements=shape.plan.steps[-1].output_elements, itemsize=given.itemsize)
        per_slice_peak = max(per_slice_peak, memory.peak_bytes)
    section: dict[str, Any] = best.slices.to_dict()
    full = plan.equation
    buffers = size_of(full.output, full.size_dict) * (2 if given.grad else 1) + sum(
        size_of(full.terms[i], full.size_dict) for i in given.grad)
    section.update({
        "per_slice_strategy": per_slice,
        "finder": choice.finder,
        "evaluated": choice.evaluated,
        "budget_bytes": choice.budget_bytes,
        "fits_budget": choice.fits,
        "smallest_peak_bytes": choice.smallest.peak_bytes,
        "unsliced_flops": unsliced_flops,
        "flops": best.flops,
        "overhead_ratio": best.flops / max(unsliced_flops, 1),
        "per_slice_peak_bytes": per_slice_peak,
        "peak_bytes_with_accumulators": best.peak_bytes,
        "accumulator_bytes": buffers * given.itemsize,
        "copies": best.copies,
        "copy_bytes": best.copy_bytes,
        "fused": bool(given.grad) and bool(given.options["fused"]),
    })
    return section


SPEC = StrategySpec(
    name="sliced",
    build=build_sliced,
    description="the step cut into slices of a few indices, each run forward then backward "
    "(reverse or checkpoint), gathered into full-size output and gradients",
    default=False,
    fallback=True,
    options={"budget_bytes": None, "indices": None, "per_slice": "reverse",
             "per_slice_options": None, "finder": "greedy", "fused": True},
    dropin_options={"fused": False},
)
