"""Time prepared callables: warm-up, block sizing, fences, median and spread.

Several callables are timed in rounds, one block of each per round
(:func:`measure_interleaved`), so that their ratios are taken over blocks measured side
by side.

Setup stays out of the timed block. Calls that need a fresh state each time (a backward
pass needs a forward pass first) are timed one call a block, with the setup done and
fenced before the clock starts. Such a block first makes one untimed call with a state
of its own (:func:`_one_block`), so that the timed call finds the host as a repeated call
does, as the calls of a block without setup do: a backward timed right after another
timer's block, or after an idle device, took 17% to 40% longer on an H200 than the
same call right after itself (``attention3`` and ``tucker``, docs/results/
gpu_2026-12-02f, mostly in the host's time to queue it). Python's garbage collector is
paused inside each timed block, as :mod:`timeit` does (:func:`paused_collection`). The
clock and the fence are parameters so that tests can inject a deterministic fake.
"""

from __future__ import annotations

import contextlib
import gc
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["COLLECTED", "Measurement", "Timer", "measure", "measure_interleaved",
           "paused_collection", "prepare"]

NOISY = 0.10
"""IQR over median at or above which a measurement is flagged as noisy."""

VERY_NOISY = 0.25
"""IQR over median at or above which the environment probably interfered."""

_MIN_DURATION_S = 1e-9


@dataclass(frozen=True, slots=True, kw_only=True)
class Measurement:
    """Raw block times and the statistics derived from them.

    Attributes:
        block_times_s: Wall seconds of each timed block.
        calls_per_block: Calls in every block.
        warmup_calls: Untimed calls made first.
        fence: How the device was synchronised around every clock read.
    """

    block_times_s: tuple[float, ...]
    calls_per_block: int
    warmup_calls: int
    fence: str

    @property
    def per_call_s(self) -> tuple[float, ...]:
        """Seconds per call of each block (clamped away from zero)."""
        return tuple(max(t, _MIN_DURATION_S) / self.calls_per_block for t in self.block_times_s)

    @property
    def median_s(self) -> float:
        """Median seconds per call."""
        return statistics.median(self.per_call_s)

    def quantile_s(self, q: float) -> float:
        """The ``q`` quantile of the per-call times (linear interpolation)."""
        ordered = sorted(self.per_call_s)
        if len(ordered) == 1:
            return ordered[0]
        position = q * (len(ordered) - 1)
        low = int(position)
        high = min(low + 1, len(ordered) - 1)
        return ordered[low] + (ordered[high] - ordered[low]) * (position - low)

    @property
    def iqr_s(self) -> float:
        """Interquartile range of the per-call times."""
        return self.quantile_s(0.75) - self.quantile_s(0.25)

    @property
    def relative_spread(self) -> float:
        """IQR over median."""
        return self.iqr_s / max(self.median_s, _MIN_DURATION_S)

    def warning(self, label: str) -> str | None:
        """A sentence for the report when the spread is large, else None."""
        spread = self.relative_spread
        if spread >= VERY_NOISY:
            return (f"{label}: IQR is {spread:.0%} of the median; the environment probably "
                    "interfered, rerun on a quiet machine")
        if spread >= NOISY:
            return f"{label}: IQR is {spread:.0%} of the median (noisy)"
        return None

    def to_dict(self) -> dict[str, Any]:
        """JSON form: statistics per call, in seconds, and the raw blocks."""
        return {
            "median": self.median_s,
            "p25": self.quantile_s(0.25),
            "p75": self.quantile_s(0.75),
            "iqr": self.iqr_s,
            "min": min(self.per_call_s),
            "max": max(self.per_call_s),
            "blocks": len(self.block_times_s),
            "calls_per_block": self.calls_per_block,
            "warmup_calls": self.warmup_calls,
            "fence": self.fence,
        }


@dataclass(slots=True, kw_only=True)
class Timer:
    """One callable, warmed up and its block sized, ready to be timed beside others.

    Attributes:
        call: The timed function; it receives the state made by ``setup`` (or None).
        setup: Makes a fresh state before every call, outside the clock.
        calls_per_block: Calls in every block.
        warmup_calls: Untimed calls already made.
        fence: Waits for the device to finish.
        fence_name: How ``fence`` synchronises, for the report.
        clock: Seconds since an arbitrary origin.
    """

    call: Callable[[Any], Any]
    setup: Callable[[], Any] | None
    calls_per_block: int
    warmup_calls: int
    fence: Callable[[], None]
    fence_name: str
    clock: Callable[[], float]

    def block(self) -> float:
        """Wall seconds of one timed block (states made and fenced before the clock)."""
        return _one_block(self, self.calls_per_block, rewarm=self.setup is not None)


def _one_block(timer: Timer, calls: int, *, rewarm: bool = False) -> float:
    with paused_collection():  # a collection in the setup would evict the call's caches
        if rewarm and timer.setup is not None:  # untimed, its state dropped before the next
            timer.call(timer.setup())
        states = ([timer.setup() for _ in range(calls)] if timer.setup is not None
                  else [None] * calls)
        timer.fence()
        start = timer.clock()
        for state in states:
            timer.call(state)
        timer.fence()
        return timer.clock() - start


COLLECTED = 1
"""The generations :func:`measure_interleaved` collects before its rounds: 0 and 1, where
the garbage of the timers' preparation and warm-up lies. A full collection walks every
object of the caller's process: 0.1 to 0.7 s per ``execute()`` with a test suite or a
model library loaded, paid for nothing the rounds measure."""


@contextlib.contextmanager
def paused_collection() -> Iterator[None]:
    """Python's cyclic garbage collector paused inside (as :mod:`timeit` does).

    A collection is the process's, not the timed call's: it runs when the process has
    allocated enough, so in rounds that allocate alike it falls on the same timer's
    block every round, and a median keeps it. Run in a block's setup, it also leaves
    the call that follows cold: it walks every object of the process. (The host
    calibration's backward call of the two-matrix chain took twice the four-matrix
    one's that way on the 2-core cpu.) :func:`measure_interleaved` pauses it over all
    its rounds, after a collection of the young generations (:data:`COLLECTED`).
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def prepare(
    call: Callable[[Any], Any],
    *,
    setup: Callable[[], Any] | None = None,
    warmup: int = 3,
    fence: Callable[[], None] = lambda: None,
    fence_name: str = "none",
    clock: Callable[[], float] = time.perf_counter,
    target_block_s: float = 0.02,
    max_calls_per_block: int = 1000,
) -> Timer:
    """Warm ``call`` up and size its block; nothing of it is timed for the report yet.

    Without ``setup``, blocks grow tenfold until one takes ``target_block_s`` (or
    ``max_calls_per_block`` is reached); that growth doubles as warm-up. With ``setup``,
    each block is one call whose state ``setup`` prepared untimed (timed blocks, not the
    warm-up, make one untimed call of their own first). The arguments are
    :func:`measure`'s.
    """
    timer = Timer(call=call, setup=setup, calls_per_block=1, warmup_calls=0, fence=fence,
                  fence_name=fence_name, clock=clock)
    for _ in range(warmup):
        _one_block(timer, 1)
        timer.warmup_calls += 1
    if setup is None:
        calls = 1
        while calls < max_calls_per_block:
            elapsed = _one_block(timer, calls)
            timer.warmup_calls += calls
            if elapsed >= target_block_s:
                break
            calls = min(calls * 10, max_calls_per_block)
        timer.calls_per_block = calls
    return timer


def measure_interleaved(timers: Sequence[Timer], *, repeats: int) -> tuple[Measurement, ...]:
    """Time every timer's ``repeats`` blocks in rounds: one block of each per round.

    Blocks measured side by side see the same load, so a change of load during the
    rounds moves every timer's median alike and their ratios keep. Each round starts one
    timer further on, so that no timer always follows the same one.

    Example:
        >>> timers = [prepare(lambda state: sum(range(100)), warmup=1) for _ in range(2)]
        >>> [len(m.block_times_s) for m in measure_interleaved(timers, repeats=3)]
        [3, 3]
    """
    if repeats < 1:
        raise ValueError("repeats must be at least 1")
    blocks: list[list[float]] = [[] for _ in timers]
    gc.collect(COLLECTED)
    with paused_collection():
        for round_ in range(repeats):
            for offset in range(len(timers)):
                index = (round_ + offset) % len(timers)
                blocks[index].append(timers[index].block())
    return tuple(
        Measurement(block_times_s=tuple(times), calls_per_block=timer.calls_per_block,
                    warmup_calls=timer.warmup_calls, fence=timer.fence_name)
        for timer, times in zip(timers, blocks, strict=True))


def measure(
    call: Callable[[Any], Any],
    *,
    setup: Callable[[], Any] | None = None,
    repeats: int = 10,
    warmup: int = 3,
    fence: Callable[[], None] = lambda: None,
    fence_name: str = "none",
    clock: Callable[[], float] = time.perf_counter,
    target_block_s: float = 0.02,
    max_calls_per_block: int = 1000,
) -> Measurement:
    """Time ``call`` after warm-up, on its own (:func:`measure_interleaved` of one).

    Without ``setup``, calls run in blocks whose size grows tenfold until a block takes
    ``target_block_s`` (or ``max_calls_per_block`` is reached); that growth doubles as
    warm-up. With ``setup``, each block is one call whose state ``setup`` prepared
    untimed, after one untimed call (setup and call) of its own.

    Args:
        call: The timed function; it receives the state made by ``setup`` (or None).
        setup: Makes a fresh state before every call, outside the clock.
        repeats: Number of timed blocks.
        warmup: Untimed calls before anything is timed.
        fence: Waits for the device to finish (e.g. ``torch.cuda.synchronize``).
        fence_name: How ``fence`` synchronises, for the report.
        clock: Seconds since an arbitrary origin.
        target_block_s: Smallest block duration worth timing.
        max_calls_per_block: Cap on the block size.

    Returns:
        The :class:`Measurement`.

    Example:
        >>> m = measure(lambda state: sum(range(100)), repeats=5, warmup=1)
        >>> m.median_s > 0
        True
    """
    if repeats < 1:
        raise ValueError("repeats must be at least 1")
    timer = prepare(call, setup=setup, warmup=warmup, fence=fence, fence_name=fence_name,
                    clock=clock, target_block_s=target_block_s,
                    max_calls_per_block=max_calls_per_block)
    return measure_interleaved([timer], repeats=repeats)[0]
