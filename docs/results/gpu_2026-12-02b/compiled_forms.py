"""Under torch.compile: the compiler's lowering of torch.einsum against the plan's op.

The script of docs/results/gpu_2026-12-02b/compiled_forms.txt, run from the repository
root on the H200: ``python3 docs/results/gpu_2026-12-02b/compiled_forms.py CASE,CASE,...``.
For each case (benchmarks/cases.json or model_einsums.json, every operand differentiated,
float32, TF32 off): forward + backward of eager torch.einsum, the eager drop-in, compiled
torch.einsum, the compiled drop-in as it is (``auto``: torch.einsum in the graph) and the
compiled drop-in with the plan's custom op forced into the graph; median of 25 interleaved
blocks, each ratio to eager torch.einsum.
"""

# ruff: noqa: T201

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch._dynamo

import einsum_analyze.torch as dropin
from einsum_analyze.torch import einsum

ROOT = Path("benchmarks")


def block(step: Callable[[], Any], calls: int) -> float:
    """Seconds per call of ``calls`` calls of ``step``, fenced at both ends."""
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        step()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / calls


def steps_of(equation: str, shapes: list[list[int]]) -> dict[str, Callable[[], Any]]:
    """Forward + backward of the five forms, compiled ones compiled."""
    generator = torch.Generator().manual_seed(0)
    ops = [torch.randn(s, generator=generator).cuda().requires_grad_() for s in shapes]
    with torch.no_grad():
        upstream = torch.randn(torch.einsum(equation, *ops).shape, generator=generator).cuda()

    def step_of(contract: Callable[..., Any]) -> Callable[[], Any]:
        return lambda: torch.autograd.grad(contract(*ops), ops, upstream)

    def theirs(*xs: Any) -> Any:
        return torch.einsum(equation, *xs)

    def ours(*xs: Any) -> Any:
        return einsum(equation, *xs)

    steps = {"torch": step_of(theirs), "ours": step_of(ours)}
    traced = dropin.traced_runs_torch
    for label, contract, forced in (("torch-compiled", theirs, False),
                                    ("ours-compiled", ours, False),
                                    ("ours-compiled-op", ours, True)):
        torch._dynamo.reset()
        if forced:  # the plan's op in the graph, whatever auto chose
            dropin.traced_runs_torch = lambda *a, **k: False
        step = step_of(torch.compile(contract, fullgraph=True, dynamic=False))
        step()
        step()
        dropin.traced_runs_torch = traced
        steps[label] = step
    return steps


def main() -> None:
    """One line per case named on the command line."""
    torch.backends.cuda.matmul.allow_tf32 = False
    cases = {c["name"]: c for name in ("cases.json", "model_einsums.json")
             for c in json.loads((ROOT / name).read_text())["cases"]}
    for name in sys.argv[1].split(","):
        steps = steps_of(cases[name]["equation"], cases[name]["shapes"])
        for step in steps.values():
            for _ in range(3):
                step()
        calls = 1
        while block(steps["torch"], calls) * calls < 3e-3 and calls < 1000:
            calls *= 2
        times: dict[str, list[float]] = {label: [] for label in steps}
        labels = list(steps)
        for repeat in range(25):
            shift = repeat % len(labels)
            for label in labels[shift:] + labels[:shift]:
                times[label].append(block(steps[label], calls))
        medians = {label: statistics.median(values) for label, values in times.items()}
        print(f"{name:20s} " + "  ".join(
            f"{label} {value * 1e3:.3f}ms ({value / medians['torch']:.2f})"
            for label, value in medians.items()), flush=True)


if __name__ == "__main__":
    main()
