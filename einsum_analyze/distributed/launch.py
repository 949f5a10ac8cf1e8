"""One process per device: start them, collect what each returns, leave none behind.

A rank's target runs in a fresh interpreter (multiprocessing ``spawn``: CUDA cannot be
forked) and returns plain data (numbers, text), never tensors. The parent watches the
result queue and every process:

- a rank that raises sends its error back (``ValueError: ...``);
- a rank that dies without a word (``os._exit``, a signal, the OOM killer) is found by
  its exit status: ``exited with status 3``, ``killed by SIGKILL``;
- a rank that is silent past the deadline is ``no result after 120 s``.

As soon as one rank fails the others are stopped (their collectives would wait for the
dead rank until the process group's own timeout). Every process is then terminated
(SIGTERM, then SIGKILL after a grace period) and joined, whatever happened, so a failed
run leaves no process behind. A parent that dies itself (SIGTERM, SIGKILL, the OOM killer)
runs no clean-up: on Linux each rank asks the kernel to kill it with its parent
(``PR_SET_PDEATHSIG``), so no orphan is left computing or waiting in a collective.
"""

from __future__ import annotations

import multiprocessing
import os
import queue as queue_module
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["RankOutcome", "error_rank", "free_port", "launch"]

GRACE_S = 3.0
"""How long a terminated process gets before SIGKILL."""

SETTLE_S = 2.0
"""After a rank fails, how long the others get to report before they are stopped."""

MAX_ERROR_CHARS = 240
"""A rank's error is cut to this many characters (gloo's messages run long)."""


@dataclass(frozen=True, slots=True)
class RankOutcome:
    """What one rank returned, or why it did not.

    Attributes:
        rank: The process's rank.
        result: The target's return value (None when it failed).
        error: One line saying why it failed; None when it succeeded.
    """

    rank: int
    result: Any = None
    error: str | None = None


def free_port() -> int:
    """A TCP port on 127.0.0.1 free now, for the process group's rendezvous."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _die_with_parent(parent: int) -> None:
    """Linux: have the kernel SIGKILL this process when its parent dies."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # no libc prctl: the parent's clean-up only
        return
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


def _entry(target: Callable[..., Any], rank: int, args: tuple[Any, ...],
           results: Any, parent: int) -> None:
    _die_with_parent(parent)
    try:
        value = target(rank, *args)
    except BaseException as err:  # noqa: BLE001 - reported to the parent, then exit 1
        frame = traceback.extract_tb(err.__traceback__)[-1:] if err.__traceback__ else []
        where = f" ({frame[0].filename.rsplit('/', 1)[-1]}:{frame[0].lineno})" if frame else ""
        message = str(err).strip().splitlines()[0] if str(err).strip() else ""
        if len(message) > MAX_ERROR_CHARS:
            message = message[:MAX_ERROR_CHARS - 3] + "..."
        results.put((rank, None, f"{type(err).__name__}: {message}{where}".strip()))
        results.close()
        results.join_thread()
        raise SystemExit(1) from None
    results.put((rank, value, None))
    results.close()
    results.join_thread()


def _death(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with status {code} without a result"


def launch(target: Callable[..., Any], args: Sequence[tuple[Any, ...]], *,
           timeout_s: float) -> tuple[RankOutcome, ...]:
    """Run ``target(rank, *args[rank])`` in one spawned process per rank.

    Args:
        target: A module-level function (spawn pickles it by name).
        args: One argument tuple per rank.
        timeout_s: Seconds the whole run may take; ranks still silent then fail.

    Returns:
        One outcome per rank, rank order. When a rank failed, the ranks stopped because
        of it say ``stopped: rank K failed``.
    """
    context = multiprocessing.get_context("spawn")
    results: Any = context.Queue()
    processes = [context.Process(target=_entry,
                                 args=(target, rank, rank_args, results, os.getpid()),
                                 name=f"einsum-analyze-rank{rank}", daemon=True)
                 for rank, rank_args in enumerate(args)]
    outcomes: dict[int, RankOutcome] = {}
    try:
        for process in processes:
            process.start()
        _collect(processes, results, outcomes, time.monotonic() + timeout_s, timeout_s)
    finally:
        _stop(processes)
        results.close()
        results.cancel_join_thread()
    return tuple(outcomes[rank] for rank in range(len(processes)))


def _collect(processes: Sequence[Any], results: Any, outcomes: dict[int, RankOutcome],
             deadline: float, timeout_s: float) -> None:
    """Fill ``outcomes`` until every rank has one, a rank fails, or the deadline.

    After the first failure the others get :data:`SETTLE_S` to report or to be found
    dead: a rank that dies makes its peers' collectives fail at once, and the report
    should name the dead rank, not only the peers' lost connections.
    """
    silent_since: dict[int, float] = {}
    failed_at: float | None = None
    while len(outcomes) < len(processes):
        now = time.monotonic()
        if failed_at is not None and now - failed_at > SETTLE_S:
            break
        try:
            rank, value, error = results.get(timeout=0.1)
            outcomes[rank] = RankOutcome(rank, value, error)
            if error is not None and failed_at is None:
                failed_at = time.monotonic()
            continue
        except queue_module.Empty:
            pass
        for rank, process in enumerate(processes):
            if rank in outcomes or process.is_alive():
                continue
            # Dead: its last message may still be in the pipe; wait a moment for it.
            first = silent_since.setdefault(rank, now)
            if now - first > 0.5:
                outcomes[rank] = RankOutcome(rank, None, _death(process.exitcode))
                failed_at = now if failed_at is None else failed_at
        if now > deadline:
            for rank in range(len(processes)):
                if rank not in outcomes:
                    outcomes[rank] = RankOutcome(rank, None, f"no result after {timeout_s:g} s")
            return
    culprit = min((o for o in outcomes.values() if o.error is not None),
                  key=lambda o: (error_rank(o.error), o.rank), default=None)
    for rank in range(len(processes)):
        if rank not in outcomes:
            what = f"rank {culprit.rank}" if culprit is not None else "another rank"
            outcomes[rank] = RankOutcome(rank, None, f"stopped: {what} failed")


def error_rank(error: str | None) -> int:
    """How close an error is to the cause (the lowest is named first).

    0 a process that died, 1 its own exception, 2 a collective that lost its peer,
    3 stopped by the parent, 4 no error.
    """
    if error is None:
        return 4
    if error.startswith(("killed by", "exited with", "no result after")):
        return 0
    if error.startswith("stopped:"):
        return 3
    lowered = error.lower()
    if "distributed_c10d" in lowered or "gloo" in lowered or "nccl" in lowered:
        return 2
    return 1


def _stop(processes: Sequence[Any]) -> None:
    """Terminate, then kill, then join every process that was started."""
    started = [p for p in processes if p.pid is not None]
    for process in started:
        if process.is_alive():
            process.terminate()
    end = time.monotonic() + GRACE_S
    for process in started:
        process.join(max(0.0, end - time.monotonic()))
    for process in started:
        if process.is_alive():
            process.kill()
            process.join()
