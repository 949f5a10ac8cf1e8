"""The roofline and the step times cover the sliced strategy's own steps.

A sliced schedule zero-fills its accumulators, copies parts of operands that are not
contiguous and adds each slice's result into its accumulator. Their bytes are the
slicing's own traffic: copy bytes, never in the bound.
"""

from __future__ import annotations

from einsum_analyze import analyze
from einsum_analyze.roofline.steps import step_costs


def _sliced(indices: dict[str, int]):  # type: ignore[no-untyped-def]
    report = analyze("ab,bc->ac", [(4, 6), (6, 8)], strategies=["sliced"],
                     strategy_options={"sliced": {"indices": indices}})
    (strategy,) = report.strategies
    return report, strategy


def test_sliced_steps_count_their_copies_and_sums_apart_from_the_bound() -> None:
    report, strategy = _sliced({"b": 3})
    steps = step_costs(strategy.events, strategy.sizes(report.equation.size_dict), 4)
    kinds = [s.kernel for s in steps]
    # Accumulators: y (4x8) and the two gradients (4x6, 6x8), zero-filled once each.
    zeros = [s for s in steps if s.kernel == "zeros"]
    assert sorted(s.copy_bytes for s in zeros) == [24 * 4, 32 * 4, 48 * 4]
    # b sliced in two parts of 3: in0 (a, b) is not contiguous in a part, so each slice
    # copies its 4x3 part (read and written); in1's part (b, c) is a view.
    copies = [s for s in steps if s.kernel == "slice_copy"]
    assert [s.copy_bytes for s in copies] == [2 * 12 * 4, 2 * 12 * 4]
    # Each slice adds its output part (4x8) and its two gradient parts (4x3, 3x8).
    sums = sorted((s.flops, s.copy_bytes) for s in steps if s.kernel == "accumulate")
    assert sums == sorted([(p, 3 * p * 4) for p in (32, 12, 24)] * 2)
    for step in zeros + copies:
        assert (step.flops, step.bytes, step.bound_s(1e9, 1e9)) == (0, 0, 0.0)
    assert kinds.count("bmm") == 6  # forward and two gradients, per slice


def test_an_unsliced_schedule_has_no_slicing_steps() -> None:
    report = analyze("ab,bc->ac", [(4, 6), (6, 8)], strategies=["reverse"])
    (strategy,) = report.strategies
    kinds = {s.kernel for s in step_costs(strategy.events, report.equation.size_dict, 4)}
    assert kinds.isdisjoint({"zeros", "slice_copy", "accumulate"})
