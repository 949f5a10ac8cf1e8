"""What the benchmark scripts share: scaled shapes, the case options, the environment."""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn, TypeVar

Case = TypeVar("Case")

CASES = Path(__file__).resolve().parent / "cases.json"

CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter,
                                          "cpu": time.process_time}
"""``--clock`` of the drop-in and model benchmarks: wall time, or the process's CPU time
(all its threads), which on a shared CPU leaves out the time other processes hold the
cores."""


def fence(device: str) -> None:
    """Wait for the device's queued work (a no-op off CUDA)."""
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def block_seconds(step: Callable[[], Any], device: str, calls: int,
                  clock: Callable[[], float] = time.perf_counter) -> float:
    """Seconds per call of ``calls`` calls of ``step``, fenced at both ends."""
    fence(device)
    start = clock()
    for _ in range(calls):
        step()
    fence(device)
    return max(clock() - start, 1e-9) / calls


def interleaved_times(steps: dict[str, Callable[[], Any]], device: str, repeats: int,
                      warmup: int, min_block_s: float,
                      clock: Callable[[], float] = time.perf_counter) -> dict[str, list[float]]:
    """Seconds per call of each step in each of ``repeats`` rounds, blocks interleaved.

    Each step's calls per block grow until a block lasts ``min_block_s`` (this doubles
    as the warm-up, after ``warmup`` plain calls); every step then runs blocks of the
    largest of those counts, so that the fence weighs alike on each. Round ``k`` runs one
    block of every step, each step going first as often as the others: the ``k``-th
    figures of two steps were taken moments apart, so their ratio is paired.
    """
    calls: dict[str, int] = {}
    for name, step in steps.items():
        for _ in range(warmup):
            step()
        count = 1
        while (block_seconds(step, device, count, clock) * count < min_block_s
               and count < 10_000):
            count *= 10
        calls[name] = count
    # One block size for every run: a block of fewer calls carries more of the fence.
    calls = dict.fromkeys(calls, max(calls.values()))
    times: dict[str, list[float]] = {name: [] for name in steps}
    names = list(steps)
    for repeat in range(repeats):
        shift = repeat % len(names)  # each run goes first as often as the others
        for name in names[shift:] + names[:shift]:
            times[name].append(block_seconds(steps[name], device, calls[name], clock))
    return times


def interleaved_medians(steps: dict[str, Callable[[], Any]], device: str, repeats: int,
                        warmup: int, min_block_s: float,
                        clock: Callable[[], float] = time.perf_counter) -> dict[str, float]:
    """Median seconds per call of each step (:func:`interleaved_times`), and as
    ``"NAME min"`` its fastest block: on a shared machine, the block the others
    disturbed least."""
    times = interleaved_times(steps, device, repeats, warmup, min_block_s, clock)
    return {name: statistics.median(values) for name, values in times.items()} | {
        f"{name} min": min(values) for name, values in times.items()}


def paired_ratio(numerator: list[float], denominator: list[float]) -> float:
    """The median of the per-round ratios of two steps' :func:`interleaved_times`.

    On a shared machine the load drifts between rounds; two blocks of one round saw
    nearly the same load, so their ratio varies less than the ratio of two medians.
    """
    return statistics.median(a / b for a, b in zip(numerator, denominator, strict=True))


def add_case_options(parser: argparse.ArgumentParser) -> None:
    """``--device``, ``--cases``, ``--dtype``, ``--scale``, ``--repeats``, ``--warmup``,
    ``--json``: the options of a benchmark over the shared cases."""
    parser.add_argument("--device", default=None, help="cuda or cpu (default: cuda if any)")
    parser.add_argument("--cases", default="", help="comma-separated names (default: all)")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--scale", type=int, default=8, help="cpu: divide large dims by this")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--json", default=None, help="write the results here")
    add_time_limit(parser)


def add_time_limit(parser: argparse.ArgumentParser) -> None:
    """``--max-seconds``: the benchmark starts no case it predicts to end past it."""
    parser.add_argument("--max-seconds", type=positive_seconds, default=None,
                        help="start no case predicted to end past this many seconds of the "
                             "run (the longest case so far is the prediction); the output "
                             "names the cases left out (default: no limit)")


def positive_seconds(text: str) -> float:
    """An argparse type: seconds above 0 and finite, else a one-line usage error."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not seconds above 0")
    return value


class TimeLimit:
    """The cases a benchmark runs within ``--max-seconds``, and the ones it leaves out.

    A case starts only while the time so far plus the next case's predicted time stays
    within the limit: the longest case so far, where the first case counts a third of
    its time: it carries the process's one-time work (the device's context, the
    calibration), and counted whole it made bench_execution's 18 s limit on the H200 leave
    out 9 of its 10 cases after the first, in a run of 12 s. So the run ends inside the
    limit unless a case runs longer than its prediction.
    """

    FIRST_SHARE = 1 / 3
    """The share of the first case's time that predicts the cases after it."""

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self.start = time.perf_counter()
        self.left_out: list[str] = []

    def cases(self, cases: Iterable[Any], name: Callable[[Any], str] = lambda c: c["name"]
              ) -> Iterator[Any]:
        """Yield the cases in order while the next one is predicted to fit."""
        predicted = 0.0
        for position, case in enumerate(cases):
            now = time.perf_counter() - self.start
            if self.left_out or (self.seconds is not None and now + predicted > self.seconds):
                self.left_out.append(name(case))
                continue
            began = time.perf_counter()
            yield case
            took = time.perf_counter() - began
            predicted = max(predicted, took * (self.FIRST_SHARE if position == 0 else 1.0))

    def line(self) -> str | None:
        """One line naming the cases left out, or None where every case ran."""
        if not self.left_out:
            return None
        return (f"left out at --max-seconds {self.seconds:g}: {len(self.left_out)} "
                f"case{'s' if len(self.left_out) > 1 else ''} ({', '.join(self.left_out)})")

    def report(self) -> None:
        """Print :meth:`line` where some cases were left out."""
        if (line := self.line()) is not None:
            print(line)  # noqa: T201


def read_cases(args: argparse.Namespace, *, models: bool = False
               ) -> tuple[str, list[dict[str, Any]]]:
    """The device (``cuda`` read as ``cuda:0``) and the cases ``--cases`` names, of
    ``cases.json`` (and ``model_einsums.json`` with ``models``)."""
    import torch

    device = args.device or ("cuda:0" if torch.cuda.is_available() else "cpu")
    device = "cuda:0" if device == "cuda" else device
    cases = json.loads(CASES.read_text(encoding="utf-8"))["cases"]
    if models:
        cases += json.loads((CASES.parent / "model_einsums.json").read_text(
            encoding="utf-8"))["cases"]
    return device, select_cases(cases, args.cases)


def wanted_names(text: str | None, known: Iterable[str], *, option: str = "--cases"
                 ) -> list[str]:
    """The names a comma-separated option (``--cases``, ``--models``) gives, in its order,
    each once (none: ``[]``).

    A name that is not ``known`` is a usage error: one line on stderr naming it and the
    names there are, and exit status 2 (:func:`refuse_unknown`), before anything runs.
    """
    wanted = list(dict.fromkeys(name.strip() for name in (text or "").split(",")
                                if name.strip()))
    names = list(dict.fromkeys(known))
    unknown = [name for name in wanted if name not in names]
    if unknown:
        refuse_unknown(option, unknown, names)
    return wanted


def refuse_unknown(option: str, unknown: Sequence[str], known: Iterable[str]) -> NoReturn:
    """One line on stderr naming the unknown names and the known ones; exit status 2."""
    named = ", ".join(repr(name) for name in unknown)
    print(f"{option}: unknown {named} (known: {', '.join(known)})",  # noqa: T201
          file=sys.stderr)
    raise SystemExit(2)


def select_cases(cases: Sequence[Case], text: str | None, *, option: str = "--cases",
                 name: Callable[[Case], str] = lambda case: case["name"]  # type: ignore[index]
                 ) -> list[Case]:
    """The cases the option names, in the file's order; every case where it names none.

    An unknown name exits as :func:`wanted_names` says.
    """
    wanted = wanted_names(text, (name(case) for case in cases), option=option)
    return [case for case in cases if not wanted or name(case) in wanted]


def scaled(shapes: list[list[int]], factor: int) -> list[list[int]]:
    """Divide every dimension of 64 or more by ``factor`` (same sizes stay equal)."""
    return [[max(1, d // factor) if d >= 64 else d for d in shape] for shape in shapes]


def environment(device: str) -> dict[str, object]:
    """Versions, threads and the GPU a benchmark ran with."""
    import numpy
    import opt_einsum
    import torch

    info: dict[str, object] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": torch.__version__,
        "opt_einsum": opt_einsum.__version__,
        "numpy": numpy.__version__,
        "torch_threads": torch.get_num_threads(),
        "device": device,
    }
    if device.startswith("cuda"):
        info["gpu"] = torch.cuda.get_device_name(0)
        info["cuda"] = torch.version.cuda
    return info


def finish(device: str, rows: list[dict[str, Any]], path: str | None,
           **fields: Any) -> None:
    """Print the environment and the first calibration; write the rows to ``path``."""
    environment_ = environment(device)
    calibration = next((r["calibration"] for r in rows if r.get("calibration")), None)
    print(json.dumps({"environment": environment_, "calibration": calibration},  # noqa: T201
                     indent=1))
    if path:
        Path(path).write_text(json.dumps(
            {"environment": environment_, **fields, "results": rows},
            indent=1, sort_keys=True) + "\n", encoding="utf-8")
