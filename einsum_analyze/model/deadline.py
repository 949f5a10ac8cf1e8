"""A deadline for opt_einsum's path search: a timer signal that stops it where it runs.

:func:`alarm` arms the timer around a search in :mod:`.planning`; a ring raises
:class:`SearchTimeout` only inside the search's own code (:data:`SEARCH_MODULES`).
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["SEARCH_MODULES", "SearchTimeout", "alarm"]


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
