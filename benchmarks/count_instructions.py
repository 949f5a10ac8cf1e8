"""Instructions of the analysis against ``opt_einsum.contract_path``, counted by cachegrind.

CPU seconds on a shared machine move by a third between runs; instruction counts move by
well under 1%. This script counts them for issue 21's 3x target: at each n, on
``opt_einsum.testing.rand_equation(n, 3, seed=0, d_min=2, d_max=8)``,

- ``contract_path``: ``opt_einsum.contract_path(eq, *shapes, shapes=True, optimize="greedy")``;
- ``reverse+torch-autograd``: ``analyze(eq, shapes, optimize="greedy",
  strategies=("reverse", "torch-autograd"))``.

Each figure is a process that runs K calls less one that runs none (the imports, the
equation), over K (K = 20 at 10 tensors, 4 up to 100, then 1), under ``valgrind
--tool=cachegrind --cache-sim=no`` with ``PYTHONHASHSEED=0``, ``OPENBLAS_NUM_THREADS=1``
and the cyclic collector off, as the benchmark's timed samples have it. Needs valgrind.

    python benchmarks/count_instructions.py --sizes 10,100,500,1000,2000
    python benchmarks/count_instructions.py --sizes 100 --other /path/to/old/tree

``--other`` names a directory whose ``einsum_analyze`` package is counted too (the code
before a change), on ``PYTHONPATH`` ahead of this one.
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RATIO_TARGET = 3.0
_REFS = re.compile(r"I\s+refs:\s+([\d,]+)")


def _calls(n: int) -> int:
    return 20 if n <= 10 else 4 if n <= 100 else 1


def _child(mode: str, n: int, k: int) -> None:
    """What a counted process runs: ``k`` calls of ``mode`` at ``n`` tensors."""
    import opt_einsum
    from opt_einsum.testing import rand_equation

    from einsum_analyze import analyze

    eq, shapes = rand_equation(n, 3, seed=0, d_min=2, d_max=8)[:2]
    shapes = [tuple(s) for s in shapes]
    gc.disable()
    for _ in range(k):
        if mode == "analysis":
            analyze(eq, shapes, optimize="greedy", strategies=("reverse", "torch-autograd"))
        else:
            opt_einsum.contract_path(eq, *shapes, shapes=True, optimize="greedy")


def _count(tree: Path, mode: str, n: int, k: int) -> int:
    env = {**os.environ, "PYTHONHASHSEED": "0", "OPENBLAS_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
         sys.executable, __file__, "--child", mode, str(n), str(k)],
        env=env, capture_output=True, text=True, check=True)
    found = _REFS.search(done.stderr)
    if found is None:
        raise SystemExit(f"no instruction count in valgrind's output:\n{done.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def _per_call(tree: Path, mode: str, n: int) -> float:
    k = _calls(n)
    return (_count(tree, mode, n, k) - _count(tree, mode, n, 0)) / k / 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,100,500,1000,2000",
                        help="numbers of tensors, comma-separated")
    parser.add_argument("--other", type=Path, default=None,
                        help="a directory holding the einsum_analyze package to count too")
    parser.add_argument("--child", nargs=3, metavar=("MODE", "N", "K"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        mode, n, k = args.child
        _child(mode, int(n), int(k))
        return 0
    if shutil.which("valgrind") is None:
        print("count_instructions: valgrind is not installed", file=sys.stderr)
        return 2
    sizes = [int(s) for s in args.sizes.split(",") if s]
    trees = [("this tree", ROOT)] + ([("other", args.other)] if args.other else [])
    head = ["n", "contract_path, M instructions"]
    for name, _ in trees:
        head.append(f"{name}, M (ratio)")
    print("| " + " | ".join(head) + " |")
    print("| " + " | ".join("---" for _ in head) + " |")
    for n in sizes:
        path = _per_call(ROOT, "contract_path", n)
        row = [str(n), f"{path:.2f}"]
        for _, tree in trees:
            ours = _per_call(tree, "analysis", n)
            row.append(f"{ours:.1f} ({ours / path:.2f}x)")
        print("| " + " | ".join(row) + " |", flush=True)
    print(f"\ntarget: reverse+torch-autograd at most {RATIO_TARGET:g}x contract_path; "
          "K calls less none, over K (K = 20 at 10 tensors, 4 up to 100, then 1)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
