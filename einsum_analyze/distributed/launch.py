"""One process per device: start them, collect what each returns, leave none behind.

A rank's target runs in a fresh interpreter (multiprocessing ``spawn``: CUDA cannot be
forked) and returns plain data (numbers, text), never tensors. The parent watches the
result queue and every process:

- a rank that raises sends its error back (``ValueError: ...``);
- a rank that dies without a word (``os._exit``, a signal, the OOM killer) is found by
  its exit status: ``exited with status 3``, ``killed by SIGKILL``;
- a rank that stops (SIGSTOP, a frozen host) is found by its heartbeat: a thread of
  every rank stamps the time every :data:`HEARTBEAT_S`; once the rank has marked its
  first progress (torch loaded), a stamp older than the stall limit is
  ``stopped responding: no heartbeat for 4 s`` (``stopped by a signal`` when Linux
  says so);
- a rank that lives but makes no progress (every rank marks its progress,
  :func:`mark_progress`, and says when it waits in a collective) is named when no rank
  has progressed for the stall limit: the first that is not waiting for the others;
- a rank that is silent past the deadline is ``no result after 120 s``.

The stall limit is the caller's (:func:`.run.stall_limit_s` derives it from the
predicted work of the largest unit between two marks, with a floor), so a hung rank is
named in seconds, not after the whole run's timeout.

As soon as one rank fails the others are stopped (their collectives would wait for the
dead rank until the process group's own timeout). Every process is then terminated
(SIGTERM, then SIGKILL after a grace period) and joined, whatever happened, so a failed
run leaves no process behind. A parent that dies itself (SIGTERM, SIGKILL, the OOM killer)
runs no clean-up: on Linux each rank asks the kernel to kill it with its parent
(``PR_SET_PDEATHSIG``), so no orphan is left computing or waiting in a collective.

Every process started here runs with NVLink multicast off (:data:`RANK_ENVIRONMENT`),
set before the target runs, so before any NCCL communicator exists.
"""

from __future__ import annotations

import multiprocessing
import os
import queue as queue_module
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..model.units import format_seconds

__all__ = ["RANK_ENVIRONMENT", "RankOutcome", "error_rank", "free_port", "launch",
           "mark_progress"]

GRACE_S = 3.0
"""How long a terminated process gets before SIGKILL."""

SETTLE_S = 2.0
"""After a rank fails, how long the others get to report before they are stopped."""

MAX_ERROR_CHARS = 240
"""A rank's error is cut to this many characters (gloo's messages run long)."""

HEARTBEAT_S = 0.2
"""How often a rank's heartbeat thread stamps the time."""

RANK_ENVIRONMENT = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                    "NVSHMEM_DISABLE_NVLS": "1"}
"""Set in every rank: NVLink multicast (NVLS) off, in NCCL, symmetric memory, NVSHMEM."""

_SHARED: dict[str, Any] = {}
"""In a rank: its number and the shared arrays of heartbeats, marks and waits."""


def mark_progress(*, waiting: bool = False) -> None:
    """Inside a launched rank: one more unit of work done; ``waiting`` for the others next.

    Outside a rank (or a rank of another launcher) it does nothing.
    """
    if not _SHARED:
        return
    rank = _SHARED["rank"]
    _SHARED["marks"][rank] += 1
    _SHARED["waiting"][rank] = 1 if waiting else 0


def _heartbeat(beats: Any, rank: int) -> None:
    while True:
        beats[rank] = time.monotonic()
        time.sleep(HEARTBEAT_S)


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
           results: Any, parent: int, shared: tuple[Any, Any, Any]) -> None:
    _die_with_parent(parent)
    os.environ.update(RANK_ENVIRONMENT)
    beats, marks, waiting = shared
    _SHARED.update(rank=rank, beats=beats, marks=marks, waiting=waiting)
    threading.Thread(target=_heartbeat, args=(beats, rank), daemon=True,
                     name="einsum-analyze-heartbeat").start()
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
           timeout_s: float, stall_s: float | None = None) -> tuple[RankOutcome, ...]:
    """Run ``target(rank, *args[rank])`` in one spawned process per rank.

    Args:
        target: A module-level function (spawn pickles it by name).
        args: One argument tuple per rank.
        timeout_s: Seconds the whole run may take; ranks still silent then fail.
        stall_s: Seconds without a heartbeat, or without any rank's progress once every
            rank has marked some, after which a rank is named hung; None: only
            ``timeout_s``.

    Returns:
        One outcome per rank, rank order. When a rank failed, the ranks stopped because
        of it say ``stopped: rank K failed``.
    """
    context = multiprocessing.get_context("spawn")
    results: Any = context.Queue()
    n = len(args)
    shared = (context.Array("d", n, lock=False), context.Array("q", n, lock=False),
              context.Array("b", n, lock=False))
    processes = [context.Process(target=_entry,
                                 args=(target, rank, rank_args, results, os.getpid(), shared),
                                 name=f"einsum-analyze-rank{rank}", daemon=True)
                 for rank, rank_args in enumerate(args)]
    outcomes: dict[int, RankOutcome] = {}
    try:
        for process in processes:
            process.start()
        watch = None if stall_s is None else _Watch(shared, stall_s, processes)
        _collect(processes, results, outcomes, time.monotonic() + timeout_s, timeout_s, watch)
    finally:
        _stop(processes)
        results.close()
        results.cancel_join_thread()
    return tuple(outcomes[rank] for rank in range(len(processes)))


class _Watch:
    """The parent's view of the heartbeats and progress marks (see the module)."""

    def __init__(self, shared: tuple[Any, Any, Any], stall_s: float,
                 processes: Sequence[Any]) -> None:
        self.beats, self.marks, self.waiting = shared
        self.stall_s = stall_s
        self.processes = processes
        self.seen = [-1] * len(processes)
        self.changed = time.monotonic()

    def hung(self, now: float, outcomes: Mapping[int, RankOutcome]) -> RankOutcome | None:
        """The first rank found hung, or None."""
        open_ranks = [r for r in range(len(self.processes))
                      if r not in outcomes and self.processes[r].is_alive()]
        for rank in open_ranks:
            # From its first mark on (torch loaded: a library's load holds the GIL).
            beat = self.beats[rank]
            if self.marks[rank] > 0 and now - beat > self.stall_s:
                return RankOutcome(rank, None, f"stopped responding: no heartbeat for "
                                   f"{format_seconds(self.stall_s)}{_state(self.processes[rank].pid)}")
        marks = [self.marks[r] for r in range(len(self.processes))]
        if marks != self.seen:
            self.seen, self.changed = marks, now
            return None
        if not open_ranks or min(marks) == 0 or now - self.changed <= self.stall_s:
            return None
        working = [r for r in open_ranks if not self.waiting[r]] or open_ranks
        rank = min(working, key=lambda r: (marks[r], r))
        return RankOutcome(rank, None, f"no progress for {format_seconds(self.stall_s)} (the limit "
                           f"for its predicted work) while the others wait")


def _state(pid: int | None) -> str:
    """``" (stopped: state T)"`` when Linux says the process is stopped by a signal."""
    try:
        status = Path(f"/proc/{pid}/status").read_text(encoding="ascii")
    except (OSError, ValueError):
        return ""
    state = next((line.split()[1] for line in status.splitlines()
                  if line.startswith("State:")), "")
    return " (stopped by a signal: state T)" if state in ("T", "t") else ""


def _collect(processes: Sequence[Any], results: Any, outcomes: dict[int, RankOutcome],
             deadline: float, timeout_s: float, watch: _Watch | None = None) -> None:
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
        if watch is not None and failed_at is None:
            hung = watch.hung(now, outcomes)
            if hung is not None:
                outcomes[hung.rank] = hung
                failed_at = now
        if now > deadline:
            for rank in range(len(processes)):
                if rank not in outcomes:
                    outcomes[rank] = RankOutcome(
                        rank, None, f"no result after {format_seconds(timeout_s)}")
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
    if error.startswith(("killed by", "exited with", "no result after", "stopped responding",
                         "no progress for")):
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
