"""Time a prepared callable: warm-up, block sizing, fences, median and spread.

Setup stays out of the timed block. Calls that need a fresh state each time (a backward
pass needs a forward pass first) are timed one call a block, with the setup done and
fenced before the clock starts. The clock and the fence are parameters so that tests
can inject a deterministic fake.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Measurement", "measure"]

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
    """Time ``call`` after warm-up.

    Without ``setup``, calls run in blocks whose size grows tenfold until a block takes
    ``target_block_s`` (or ``max_calls_per_block`` is reached); that growth doubles as
    warm-up. With ``setup``, each block is one call whose state ``setup`` prepared
    untimed.

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

    def one_block(calls: int) -> float:
        states = [setup() for _ in range(calls)] if setup is not None else [None] * calls
        fence()
        start = clock()
        for state in states:
            call(state)
        fence()
        return clock() - start

    warmed = 0
    for _ in range(warmup):
        one_block(1)
        warmed += 1
    calls = 1
    if setup is None:
        while calls < max_calls_per_block:
            elapsed = one_block(calls)
            warmed += calls
            if elapsed >= target_block_s:
                break
            calls = min(calls * 10, max_calls_per_block)
    blocks = tuple(one_block(calls) for _ in range(repeats))
    return Measurement(
        block_times_s=blocks,
        calls_per_block=calls,
        warmup_calls=warmed,
        fence=fence_name,
    )
