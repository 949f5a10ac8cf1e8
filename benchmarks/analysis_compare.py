"""Section (e) of bench_analysis.py: this tree's analysis against another's, interleaved.

Two runs of one benchmark compare badly on a shared machine: other jobs move
``contract_path`` alone by a third between them. Here child processes alternate, one
with this tree's package on ``PYTHONPATH`` and one with the package under ``ROOT``
(``--compare-with ROOT``, e.g. a ``git worktree`` of an older commit), round after round.
Each child times, on random regular networks (``rand_equation(n, 3, seed=0, d_min=2,
d_max=8)``), ``analyze(eq, shapes, optimize="greedy", strategies=("reverse",
"torch-autograd"))`` and ``opt_einsum.contract_path(..., optimize="greedy")`` in CPU
seconds of its own process (``time.process_time``), the fastest of 3 batches of
``max(1, 200 // n)`` calls, with the cyclic collector off during the batches. The table
gives each side's medians over the rounds, the median of each child's own ratio to its
``contract_path`` (both timed in one process, so other jobs move them together), and the
change of that ratio.
"""

# ruff: noqa: T201

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT_OF_THIS_TREE = Path(__file__).resolve().parent.parent

_CHILD = """
import gc, json, sys, time
import opt_einsum
from opt_einsum.testing import rand_equation
from einsum_analyze import analyze
analyze("ab,bc->ac", [(2, 3), (3, 4)])
out = {}
for n in map(int, sys.argv[1].split(",")):
    eq, shapes = rand_equation(n, 3, seed=0, d_min=2, d_max=8)
    calls = max(1, 200 // n)
    def fastest(function):
        best = float("inf")
        for _ in range(3):
            gc.collect()
            gc.disable()
            start = time.process_time()
            for _ in range(calls):
                function()
            best = min(best, (time.process_time() - start) / calls)
            gc.enable()
        return best
    ours = fastest(lambda: analyze(eq, shapes, optimize="greedy",
                                   strategies=("reverse", "torch-autograd")))
    base = fastest(lambda: opt_einsum.contract_path(eq, *shapes, shapes=True,
                                                    optimize="greedy"))
    out[n] = [ours, base]
print(json.dumps(out))
"""


def _child(root: Path, sizes: Sequence[int]) -> dict[int, tuple[float, float]]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run([sys.executable, "-c", _CHILD, ",".join(map(str, sizes))],
                          env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the child with PYTHONPATH={root} failed: {done.stderr[-800:]}")
    return {int(n): (ours, base) for n, (ours, base) in json.loads(done.stdout).items()}


def check_other(other: Path) -> str | None:
    """Why a ``--compare-with`` folder cannot be compared (None: it can).

    A folder without a package would leave its children to import whichever
    ``einsum_analyze`` the interpreter finds, and compare that with itself.
    """
    if not (other / "einsum_analyze" / "__init__.py").exists():
        return f"--compare-with {other}: no einsum_analyze package there"
    return None


def run_compare(other: Path, sizes: Sequence[int], rounds: int) -> dict[str, Any]:
    """Alternate children of this tree and of ``other``; each side's per-round results."""
    problem = check_other(other)
    if problem is not None:
        raise ValueError(problem)
    sides = {"this tree": ROOT_OF_THIS_TREE, "other": other}
    results: dict[str, list[dict[int, tuple[float, float]]]] = {name: [] for name in sides}
    order = list(sides)
    for round_ in range(rounds):
        for name in order if round_ % 2 == 0 else order[::-1]:
            results[name].append(_child(sides[name], sizes))
    return {"other": str(other), "sizes": list(sizes), "rounds": rounds,
            "results": {name: [{str(n): v for n, v in r.items()} for r in runs]
                        for name, runs in results.items()}}


def print_compare(result: dict[str, Any], table: Callable[..., str]) -> None:
    """Print each side's medians and the change of its ratio to its own contract_path.

    A child's own ratio cancels what other jobs did to the machine while it ran (both of
    its timings share that), so the change is taken between the sides' median ratios.
    """
    print(f"\n## (e) This tree against {result['other']}: reverse+torch-autograd, greedy, CPU ms "
          f"(fastest of 3 batches per child; median of {result['rounds']} children each, "
          "interleaved; ratio: median of each child's own analysis / contract_path)\n")
    rows = []
    for n in result["sizes"]:
        figures = {}
        for name, runs in result["results"].items():
            ours = statistics.median(run[str(n)][0] for run in runs)
            base = statistics.median(run[str(n)][1] for run in runs)
            ratio = statistics.median(run[str(n)][0] / run[str(n)][1] for run in runs)
            figures[name] = (ours, base, ratio)
        (new, new_base, new_ratio), (old, old_base, old_ratio) = (figures["this tree"],
                                                                  figures["other"])
        rows.append([str(n), f"{old * 1e3:.2f} / {old_base * 1e3:.3f}",
                     f"{new * 1e3:.2f} / {new_base * 1e3:.3f}", f"{old_ratio:.2f}",
                     f"{new_ratio:.2f}", f"{100 * (new_ratio - old_ratio) / old_ratio:+.1f}%"])
    print(table(["n", "other ms / contract_path", "this tree ms / contract_path",
                 "other ratio", "this tree ratio", "ratio change"], rows))
