"""Where output goes: consoles as wide as the user says, progress, pipes, JSON files.

The command line's terminal plumbing, apart from its options: a rich console that
respects ``COLUMNS`` (in a pipe too) and ends quietly when the reader closes the pipe,
a progress display that counts runs and cases, and the one JSON writer that never
writes NaN or Infinity. rich is imported inside the functions that draw.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["RunProgress", "check_json_path", "console", "finite", "progress",
           "quiet_closed_pipe", "write_json"]


def quiet_closed_pipe() -> None:
    """The reader closed stdout (``| head -1``): end quietly.

    Python would report the failed flush at exit; point stdout at /dev/null first.
    """
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


class RunProgress:
    """Counts runs (``3/8 reverse on cuda:0``) and cases, with elapsed and remaining time.

    Shown on stderr while it is a terminal; otherwise every call does nothing.
    """

    def __init__(self, bar: Any) -> None:
        self._bar = bar
        self._task: Any = None
        self._case_task: Any = None
        self._case_count = 0
        self._case_number = 0
        self._started = 0  # runs before the one whose label came last
        self._finished = 0  # runs done (the executor times them after every label)
        self._total: int | None = None

    def cases(self, count: int) -> None:
        """Announce a batch of ``count`` cases."""
        self._case_count = count
        if self._bar is not None and count:
            self._case_task = self._bar.add_task("cases", total=count)

    def next_case(self, name: str) -> None:
        """The next case of the batch starts."""
        self._case_number += 1
        if self._bar is not None and self._case_task is not None:
            if self._case_number > 1:
                self._bar.advance(self._case_task)
            self._bar.update(self._case_task,
                             description=f"case {self._case_number}/{self._case_count} {name}")

    def run(self, label: str) -> None:
        """The executor's ``on_progress``: ``"3/8 reverse on cpu (torch)"``."""
        if self._bar is None:
            return
        counted, _, _ = label.partition(" ")
        done, _, total = counted.partition("/")
        self._total = int(total) if total.isdigit() else None
        self._started = int(done) - 1 if done.isdigit() else 0
        if self._task is None:
            self._task = self._bar.add_task(label, total=self._total)
        self._bar.update(self._task, description=label, total=self._total,
                         completed=self._completed())

    def _completed(self) -> int:
        """Runs the bar counts: those started before the latest or finished, at most all."""
        count = max(self._started, self._finished)
        return count if self._total is None else min(count, self._total)

    def run_done(self, run: Any) -> None:
        """Stream a finished run as one line above the bar: the table follows at the end."""
        if self._bar is None:
            return
        self._finished += 1
        if self._task is not None:
            # Every run's label comes before the first is timed: a finished run moves the
            # count only past the runs already started, and never past the total.
            self._bar.update(self._task, completed=self._completed())
        if run.forward is None:
            return
        from .formatting import format_bytes, format_seconds

        parts = [f"fwd {format_seconds(run.forward.median_s)}"]
        if run.backward is not None:
            parts.append(f"bwd {format_seconds(run.backward.median_s)}")
        if run.peak_bytes_measured is not None:
            parts.append(f"peak {format_bytes(run.peak_bytes_measured)}")
        if run.max_grad_error is not None:
            parts.append(f"grad err {run.max_grad_error:.1e}")
        self._bar.console.print(f"  {run.strategy} on {run.device}: {', '.join(parts)}",
                                highlight=False)

    def finish_runs(self) -> None:
        """The runs of one report are done: drop their bar."""
        if self._bar is not None and self._task is not None:
            self._bar.remove_task(self._task)
            self._task = None
        self._started = self._finished = 0
        self._total = None


@contextmanager
def progress(*, show: bool) -> Iterator[RunProgress]:
    """A :class:`RunProgress` drawn on stderr when ``show`` and stderr is a terminal."""
    if not (show and sys.stderr.isatty()):
        yield RunProgress(None)
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
               MofNCompleteColumn(), TextColumn("elapsed"), TimeElapsedColumn(),
               TextColumn("remaining"), TimeRemainingColumn())
    with Progress(*columns, console=console(stderr=True), transient=True) as bar:
        yield RunProgress(bar)


class _TrimmedLines:
    """A text stream that drops the spaces a table pads its lines with, at their ends.

    A terminal shows them as nothing; in a pipe or a file they are bytes that ``diff``,
    ``grep ' $'`` and editors see. Each line is written whole, without them; a partial
    line waits for its end or a flush.
    """

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._pending = ""

    def write(self, text: str) -> int:
        lines = (self._pending + text).split("\n")
        self._pending = lines.pop()
        if lines:
            self._stream.write("".join(line.rstrip(" ") + "\n" for line in lines))
        return len(text)

    def flush(self) -> None:
        if self._pending:
            self._stream.write(self._pending)
            self._pending = ""
        self._stream.flush()

    def isatty(self) -> bool:
        return False

    def __getattr__(self, name: str) -> Any:  # encoding, fileno, ...: the stream's own
        return getattr(self._stream, name)


def console(*, stderr: bool = False) -> Console:
    """A console as wide as ``COLUMNS`` says, else the terminal's, else 120 columns.

    Output to a pipe or a file respects ``COLUMNS`` too, and its lines end without the
    padding of the tables (:class:`_TrimmedLines`).
    """
    import os

    from rich.console import Console

    class _QuietConsole(Console):
        def on_broken_pipe(self) -> None:
            """The reader went away (``| head -1``): exit 0 quietly, not rich's exit 1."""
            quiet_closed_pipe()
            raise SystemExit(0)

    stream = sys.stderr if stderr else sys.stdout
    is_tty = stream.isatty()
    target: Any = stream if is_tty else _TrimmedLines(stream)
    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isdigit() and 20 <= int(columns) <= 1000:
        return _QuietConsole(file=target, width=int(columns))
    if is_tty:
        return _QuietConsole(file=target)
    return _QuietConsole(file=target, width=120)


def finite(data: Any) -> Any:
    """``data`` with every NaN or infinite float replaced by null: reports hold none."""
    import math

    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {key: finite(value) for key, value in data.items()}
    if isinstance(data, list | tuple):
        return [finite(value) for value in data]
    return data


def check_json_path(json_path: str | None) -> None:
    """Refuse a JSON path that cannot be written before anything is printed or run."""
    if json_path is None or json_path == "-":
        return
    from .files import check_writable

    check_writable(json_path, "the JSON report")


def write_json(data: Any, json_path: str) -> None:
    """Write a document to ``json_path`` ('-': stdout) with the one JSON writer.

    A file is written beside its target and renamed into place (:mod:`.files`): the old
    file stays whole until the new one is.
    """
    import os

    from ..report.report import dump_json
    from .files import replace_atomically

    data = finite(data)
    if json_path == "-":
        try:
            dump_json(data, sys.stdout)
            sys.stdout.flush()
        except BrokenPipeError:  # the reader closed stdout (| head -1): not a failure
            quiet_closed_pipe()
            raise SystemExit(0) from None
        return
    with replace_atomically(json_path, "the JSON report") as temporary, \
            open(temporary, "w", encoding="utf-8") as stream:
        dump_json(data, stream)
        stream.flush()
        os.fsync(stream.fileno())
