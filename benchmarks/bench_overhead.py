"""Per-call Python cost of the executor and of the drop-in, tiny operands, cpu, one thread.

For each case (``ij,jk->ik`` 4x4, then benchmarks/cases.json with every dimension capped
at ``--cap``), microseconds per call of:

- ``events``: the plan's compiled forward and backward events run by ``run_compiled``
  on ready-made operands (no plan lookup, no autograd), strategy ``reverse``;
- ``dropin-fwd``: ``einsum_analyze.torch.einsum`` under ``no_grad``, cache hit;
- ``dropin-both``: ``autograd.grad`` of it, cache hit;
- ``torch-both``: ``autograd.grad`` of torch.einsum (the call the drop-in replaces).

With ``--before REV`` the package as committed at ``REV`` is loaded beside the working
tree's (renamed ``einsum_analyze_before``, its custom ops in their own namespace) and the
two are measured alternately in this one process, block by block: the machine may be
shared and noisy, so each figure is the minimum over ``--rounds`` blocks of
``--iterations`` calls.

    python benchmarks/bench_overhead.py --before HEAD~3 --rounds 15
"""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
ROOT = HERE.parent


def load_before(rev: str, into: Path) -> str:
    """Extract the package at ``rev`` as ``einsum_analyze_before``; return its name."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "einsum_analyze"],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    package = into / "einsum_analyze"
    for path in package.rglob("*.py"):
        text = path.read_text("utf-8")
        renamed = text.replace("einsum_analyze::", "einsum_analyze_before::")
        if renamed != text:
            path.write_text(renamed, "utf-8")
    package.rename(into / "einsum_analyze_before")
    sys.path.insert(0, str(into))
    return "einsum_analyze_before"


def capped(shapes: list[list[int]], cap: int) -> tuple[tuple[int, ...], ...]:
    """Every dimension at most ``cap`` (equal sizes stay equal, ones stay one)."""
    return tuple(tuple(min(d, cap) for d in shape) for shape in shapes)


def plan_cache(package: str) -> Any:
    """The module of the drop-in's plan cache (``training.plans``; ``dropin_plans`` before)."""
    try:
        return importlib.import_module(f"{package}.training.plans")
    except ModuleNotFoundError:
        return importlib.import_module(f"{package}.dropin_plans")


def calls(package: str, equation: str, shapes: tuple[tuple[int, ...], ...]
          ) -> dict[str, Callable[[], Any]]:
    """The timed callables of one package on one case."""
    import torch

    dropin = importlib.import_module(f"{package}.torch")
    plans = plan_cache(package)
    backend = importlib.import_module(f"{package}.backends.torch_backend")
    generator = torch.Generator().manual_seed(0)
    operands = [torch.randn(s, generator=generator, requires_grad=True) for s in shapes]
    detached = [t.detach() for t in operands]
    upstream = torch.randn(torch.einsum(equation, *detached).shape, generator=generator)
    plan = plans.get_plan(equation, shapes, "float32", "cpu", (True,) * len(shapes),
                          "reverse", "auto", -1)
    compiled = plan.compiled
    run_compiled = backend.run_compiled
    einsum = dropin.einsum

    def events() -> Any:
        live = {f"in{k}": t for k, t in enumerate(detached)}
        run_compiled(compiled.forward, live)
        live["upstream"] = upstream
        return run_compiled(compiled.backward, live)

    def dropin_fwd() -> Any:
        with torch.no_grad():
            return einsum(equation, *operands, strategy="reverse")

    def dropin_both() -> Any:
        return torch.autograd.grad(einsum(equation, *operands, strategy="reverse"),
                                   operands, upstream)

    def torch_both() -> Any:
        return torch.autograd.grad(torch.einsum(equation, *operands), operands, upstream)

    return {"events": events, "dropin-fwd": dropin_fwd, "dropin-both": dropin_both,
            "torch-both": torch_both}


def block(call: Callable[[], Any], iterations: int) -> float:
    start = time.perf_counter()
    for _ in range(iterations):
        call()
    return (time.perf_counter() - start) / iterations


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="", help="a git revision to measure alongside")
    parser.add_argument("--cap", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--cases", default="", help="comma-separated case names (default all)")
    parser.add_argument("--json", dest="json_path", default=None)
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    from _common import environment, select_cases

    cases = [("mm-4x4", "ij,jk->ik", ((4, 4), (4, 4)))]
    for case in json.loads((HERE / "cases.json").read_text())["cases"]:
        cases.append((case["name"], case["equation"], capped(case["shapes"], args.cap)))
    cases = select_cases(cases, args.cases, name=lambda case: case[0])

    import torch

    torch.set_num_threads(1)
    sys.path.insert(0, str(ROOT))
    packages = ["einsum_analyze"]
    scratch = tempfile.TemporaryDirectory()
    if args.before:
        packages.insert(0, load_before(args.before, Path(scratch.name)))
    env = environment("cpu")
    print("environment: " + json.dumps(env, sort_keys=True))
    print("microseconds per call, the minimum over rounds"
          + (f"; {args.before} -> the working tree" if args.before else ""), flush=True)
    results: dict[str, dict[str, dict[str, float]]] = {}
    for name, equation, shapes in cases:
        timed = {package: calls(package, equation, shapes) for package in packages}
        best: dict[str, dict[str, float]] = {p: {} for p in packages}
        for call_set in timed.values():  # warm up
            for call in call_set.values():
                block(call, 50)
        for _ in range(args.rounds):
            for package, call_set in timed.items():
                for what, call in call_set.items():
                    seconds = block(call, args.iterations)
                    best[package][what] = min(best[package].get(what, seconds), seconds)
        results[name] = best
        row = "  ".join(
            f"{what} " + " -> ".join(f"{best[p][what] * 1e6:6.1f}" for p in packages)
            for what in best[packages[-1]]
        )
        print(f"{name:20s} {row}", flush=True)
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(
            {"environment": env, "before": args.before, "cap": args.cap, "rounds": args.rounds,
             "iterations": args.iterations, "packages": packages, "results": results},
            indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
