"""The drop-in's own cost per call on a cache hit, against torch.einsum's, paired (cpu).

Where ``strategy="auto"`` runs torch.einsum itself (``cache_info()`` says so), the
drop-in launches torch.einsum's kernels, and what it adds is its Python: reading the
call, the option checks, the autograd, functorch and autocast probes, the plan's key and
lookup. Both it and torch.einsum (``torch.functional.einsum``: its own Python around the
same kernel entry) are timed here against that entry alone (``torch._VF.einsum``), on
tiny operands, one thread, microseconds per call:

- ``pair``: ``ij,jk->ik`` 4x4 operands needing gradients, forward only;
- ``pair, no grad``: the same under ``no_grad``;
- ``one operand``: ``ii->i``, needing its gradient;
- ``with a budget``: ``pair`` with ``budget="1GiB"`` (the drop-in alone takes one).

The calls are timed in rounds, each round one block of ``--iterations`` calls of every
run, the runs rotated so that each goes first as often; a figure is the median over the
rounds of the difference between two blocks of one round, which on a shared machine
drifts less than either block. The clock is the process's CPU time, which leaves out the
time other processes hold the cores. ``--before REV`` adds the drop-in as committed at ``REV``
(loaded beside the working tree's, as ``benchmarks/bench_overhead.py`` does).

    python benchmarks/bench_dropin_call.py --before HEAD~1 --rounds 60
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from _common import environment  # noqa: E402
from bench_overhead import load_before  # noqa: E402


def groups(packages: dict[str, str]) -> dict[str, dict[str, Callable[[], Any]]]:
    """Per call form, the timed callables: the kernel entry, torch.einsum, each drop-in."""
    import torch

    vf = torch._VF.einsum  # type: ignore[attr-defined]  # noqa: SLF001
    a, b = torch.randn(4, 4, requires_grad=True), torch.randn(4, 4, requires_grad=True)
    x = torch.randn(4, 4, requires_grad=True)
    einsums = {label: importlib.import_module(f"{name}.torch").einsum
               for label, name in packages.items()}

    def no_grad(call: Callable[[], Any]) -> Callable[[], Any]:
        def run() -> Any:
            with torch.no_grad():
                return call()
        return run

    forms: dict[str, tuple[str, tuple[Any, ...], dict[str, Any], bool]] = {
        "pair": ("ij,jk->ik", (a, b), {}, False),
        "pair, no grad": ("ij,jk->ik", (a, b), {}, True),
        "one operand": ("ii->i", (x,), {}, False),
        "with a budget": ("ij,jk->ik", (a, b), {"budget": "1GiB"}, False),
    }
    made: dict[str, dict[str, Callable[[], Any]]] = {}
    for form, (equation, operands, options, quiet) in forms.items():
        runs: dict[str, Callable[[], Any]] = {
            "kernel entry": lambda e=equation, o=operands: vf(e, o),
            "torch.einsum": lambda e=equation, o=operands: torch.einsum(e, *o),
        }
        for label, einsum in einsums.items():
            runs[label] = (lambda f=einsum, e=equation, o=operands, k=options:
                           f(e, *o, **k))
        made[form] = {name: no_grad(run) if quiet else run for name, run in runs.items()}
    return made


def paired_us(runs: dict[str, Callable[[], Any]], rounds: int,
              iterations: int) -> dict[str, list[float]]:
    """CPU seconds per call of each run in each round (rotated), after a warm-up."""
    for run in runs.values():
        for _ in range(500):
            run()
    times: dict[str, list[float]] = {name: [] for name in runs}
    names = list(runs)
    for round_ in range(rounds):
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            run = runs[name]
            start = time.process_time()
            for _ in range(iterations):
                run()
            times[name].append((time.process_time() - start) / iterations)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="", help="a git revision to measure alongside")
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--iterations", type=int, default=300)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    packages = {"drop-in": "einsum_analyze"}
    with tempfile.TemporaryDirectory() as scratch:
        if args.before:
            packages = {f"drop-in at {args.before}": load_before(args.before, Path(scratch)),
                        **packages}
        made = groups(packages)
        print("Environment: " + json.dumps({**environment("cpu"),
                                             "command": " ".join(["python"] + sys.argv)}))
        print(f"microseconds per call beyond the kernel entry (torch._VF.einsum), the median "
              f"over {args.rounds} rounds of blocks of {args.iterations} calls:")
        for form, runs in made.items():
            times = paired_us(runs, args.rounds, args.iterations)
            entry = times["kernel entry"]

            def beyond(name: str, entry: list[float] = entry,
                       times: dict[str, list[float]] = times) -> float:
                return statistics.median(t - e for t, e in zip(times[name], entry,
                                                              strict=True)) * 1e6

            cells = [f"entry {statistics.median(entry) * 1e6:6.2f}"] + [
                f"{name} {beyond(name):+6.2f}" for name in runs if name != "kernel entry"]
            print(f"  {form:14s} " + "; ".join(cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
