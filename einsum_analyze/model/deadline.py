"""Deadlines: a timer signal that stops opt_einsum's path search, and the training search's.

:func:`alarm` arms the timer around a search in :mod:`.planning`; a ring raises
:class:`SearchTimeout` only inside the search's own code (:data:`SEARCH_MODULES`).

:func:`search_deadline` sets the deadline of the training search as a whole (candidate
paths, their scores, the sliced fallback's slice finder): the code that loops over
candidates asks :func:`past_deadline` before it starts more work and keeps the best it
has. The deadline is a context variable, so threads and nested searches keep their own;
a nested deadline never extends the one around it. Its clock is a parameter
(:func:`search_deadline`'s ``clock``; :func:`now` reads it): tests give a fake one.
"""

from __future__ import annotations

import contextvars
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["SEARCH_MODULES", "HeldShare", "SearchTimeout", "alarm", "now", "past_deadline",
           "remaining_s", "search_deadline"]


def _perf_counter() -> float:
    return time.perf_counter()


_CLOCK: contextvars.ContextVar[Callable[[], float]] = contextvars.ContextVar(
    "einsum_analyze_search_clock", default=_perf_counter)
"""The clock the deadline is read on: ``time.perf_counter`` unless a test gives another."""

_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "einsum_analyze_search_deadline", default=None)
""":func:`now` value at which the training search stops starting work."""


def now() -> float:
    """The deadline's clock, in seconds (``time.perf_counter`` unless one was given)."""
    return _CLOCK.get()()


@contextmanager
def search_deadline(seconds: float | None,
                    clock: Callable[[], float] | None = None) -> Iterator[None]:
    """Within the block, :func:`past_deadline` is true ``seconds`` from now (None: never).

    An enclosing deadline that comes sooner stays in force. ``clock``: the clock the
    block's deadline is read on (None: the enclosing block's, else
    ``time.perf_counter``); a test's fake clock makes the seconds the model's own.
    """
    clock_token = None if clock is None else _CLOCK.set(clock)
    outer = _DEADLINE.get()
    mine = None if seconds is None else now() + seconds
    chosen = mine if outer is None else outer if mine is None else min(outer, mine)
    token = _DEADLINE.set(chosen)
    try:
        yield
    finally:
        _DEADLINE.reset(token)
        if clock_token is not None:
            _CLOCK.reset(clock_token)


def past_deadline() -> bool:
    """Whether the training search's deadline has passed (False without one)."""
    deadline = _DEADLINE.get()
    return deadline is not None and now() >= deadline


def remaining_s() -> float | None:
    """Seconds left before the deadline, at least 0 (None without one)."""
    deadline = _DEADLINE.get()
    return None if deadline is None else max(deadline - now(), 0.0)


class HeldShare:
    """A share of the deadline that one part of a search may use while held.

    Until ``end`` (a ``time.perf_counter()`` value; None: nothing is held back) the part
    stops there, leaving the rest of the deadline to what comes after it (the training
    search's paths, before its sliced fallback); once :meth:`lapse` is called (a plan
    fits, so the fallback will not run) it has the whole deadline.
    """

    def __init__(self, end: float | None) -> None:
        self.end = end

    def lapse(self) -> bool:
        """Stop holding the share back; whether it was held."""
        held, self.end = self.end is not None, None
        return held

    def over(self) -> bool:
        """Whether the part's time is over: the deadline, or the held share's end."""
        return past_deadline() or (self.end is not None and time.perf_counter() >= self.end)

    def held_s(self) -> float | None:
        """Seconds to the held share's end, at least 0 (None: not held).

        A :func:`search_deadline` of it around each piece of work keeps the code inside
        (a strategy that asks :func:`past_deadline`) within the share too.
        """
        return None if self.end is None else max(0.0, self.end - time.perf_counter())

    def remaining_s(self) -> float | None:
        """Seconds the part has left, at least 0 (None: no limit)."""
        left = remaining_s()
        if self.end is None:
            return left
        mine = max(0.0, self.end - time.perf_counter())
        return mine if left is None else min(left, mine)


class SearchTimeout(BaseException):
    """Raised by the timer signal inside opt_einsum's search.

    A BaseException: nothing in the search may catch it.
    """


_RING_AGAIN_S = 0.05
"""Seconds after which the timer rings again while the search runs on."""

SEARCH_MODULES = ("opt_einsum", f"{__package__}.planning")
"""Modules whose code a ring may interrupt (by prefix: :mod:`.planning` and this one).
Elsewhere (a finalizer or a gc callback that the garbage collector runs during the
search) Python would swallow the exception, print "Exception ignored", and leave the
search without a limit: the ring waits for the next."""


@contextmanager
def alarm(deadline: float | None) -> Iterator[bool]:
    """Raise :class:`SearchTimeout` in this thread when ``deadline`` passes.

    Yields whether the deadline is armed: only in the main thread, where signals are
    delivered, on platforms with ``setitimer``, and when no other timer is running.
    After the deadline the timer rings every :data:`_RING_AGAIN_S` until a ring lands
    in the search's own code (:data:`SEARCH_MODULES`); once the block has ended, a late
    ring does nothing.
    """
    if (
        deadline is None
        or not hasattr(signal, "setitimer")
        or threading.current_thread() is not threading.main_thread()
        or signal.getitimer(signal.ITIMER_REAL)[0] > 0
    ):
        yield False
        return
    armed = [True]

    def ring(signum: int, frame: FrameType | None) -> None:
        if armed[0] and frame is not None and str(
            frame.f_globals.get("__name__", "")
        ).startswith(SEARCH_MODULES):
            raise SearchTimeout

    previous = signal.signal(signal.SIGALRM, ring)
    try:
        signal.setitimer(signal.ITIMER_REAL, max(deadline - time.monotonic(), 1e-6),
                         _RING_AGAIN_S)
        yield True
    finally:
        while True:  # a ring inside the clean-up must not cut it short
            try:
                armed[0] = False
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, previous)
                break
            except SearchTimeout:
                continue
