"""Per-step times (--profile-steps) add up to the phases they divide.

On CUDA the device's intervals (its queue full) are joined with the host's pace by
``queued_intervals``; on cpu the forward is timed in blocks of calls back to back, as the
measured forward is. Both are checked here with given figures (no clock read by a test).
Whether the steps of a real run add up is tests/gpu/test_cuda_step_times.py's on CUDA
and benchmarks/bench_steps.py's on the cpu, where two timings taken seconds apart on a
loaded machine differ by more than the check's 10%.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from einsum_analyze.backends.step_timing import _block_calls, _forward_block, queued_intervals


def test_a_wait_for_the_host_belongs_to_the_event_waited_for():
    # The host queues an event every 2 us; the device takes 1, 5 and 1 us.
    intervals = queued_intervals([2e-6, 4e-6, 6e-6], [1e-6, 5e-6, 1e-6])
    assert intervals == pytest.approx([3e-6, 6e-6, 1e-6])


def test_a_host_bound_phase_takes_the_host_s_time():
    # The device is done with each event before the host queues the next one.
    intervals = queued_intervals([10e-6, 20e-6, 30e-6], [1e-6, 1e-6, 1e-6])
    assert intervals == pytest.approx([11e-6, 10e-6, 10e-6])
    assert sum(intervals) == pytest.approx(31e-6)


def test_a_device_bound_phase_takes_the_device_s_time_after_the_first_launch():
    intervals = queued_intervals([1e-6, 2e-6, 3e-6], [50e-6, 40e-6, 30e-6])
    assert intervals == pytest.approx([51e-6, 40e-6, 30e-6])


@given(st.lists(st.tuples(st.floats(0, 1e-3), st.floats(0, 1e-3)), min_size=1, max_size=12))
def test_the_intervals_add_up_to_when_the_last_event_is_done(pairs):
    gaps, busy = zip(*pairs, strict=True)
    assume(sum(busy) > 0)
    queued = [sum(gaps[:k + 1]) for k in range(len(gaps))]
    intervals = queued_intervals(queued, busy)
    # the end of the phase, found another way: each event waits for the later of the
    # two, so the phase ends at the largest "queued at k, then every event from k on"
    end = max(queued[k] + sum(busy[k:]) for k in range(len(busy)))
    assert sum(intervals) == pytest.approx(end, rel=1e-9, abs=1e-15)
    assert all(i >= b - 1e-15 for i, b in zip(intervals, busy, strict=True))


def test_block_calls_grow_tenfold_as_the_measured_forward_s_blocks():
    assert _block_calls(0.03) == 1
    assert _block_calls(0.001) == 100
    assert _block_calls(1e-6) == 1000


class _Clock:
    """A clock that moves only when the fake events and the operands' reads move it."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_what_lies_between_two_calls_belongs_to_the_next_call_s_first_event():
    clock = _Clock()
    durations = [3.0, 5.0, 7.0]

    def event(seconds):
        def op(live, workspace):
            clock.now += seconds
            return None
        return op

    class Operands(list):
        def __iter__(self):  # making a call's live tensors: 2 s between two calls
            clock.now += 2.0
            return super().__iter__()

    context = SimpleNamespace(operands=Operands([object()]), fence=lambda: None)
    means = _forward_block([event(s) for s in durations], context, 4, clock=clock)
    assert means == pytest.approx([5.0, 5.0, 7.0])
    assert sum(means) * 4 == pytest.approx(clock.now)


def test_marked_intervals_are_scaled_to_the_unmarked_total() -> None:
    from einsum_analyze.backends.step_timing import scaled_to

    # Each mark added 2 us: the excess comes off each interval alike.
    assert scaled_to([32e-6, 12e-6, 22e-6], 60e-6) == pytest.approx([30e-6, 10e-6, 20e-6])
    # An interval of marks alone goes to zero, not below; the rest still add up.
    scaled = scaled_to([1e-6, 50e-6, 30e-6], 70e-6)
    assert scaled[0] == 0.0 and sum(scaled) == pytest.approx(70e-6)
    # A marked run quicker than the unmarked one (noise) is scaled up to its total.
    assert scaled_to([10e-6, 30e-6], 44e-6) == pytest.approx([11e-6, 33e-6])
    assert scaled_to([0.0, 0.0], 5e-6) == [0.0, 0.0]  # nothing to share out
