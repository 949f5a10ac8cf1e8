"""Backward analysis speed on the `scaling` networks of benchmarks/cases.json.

For random regular networks (opt_einsum.testing.rand_equation, regularity 3, sizes 2..8,
seed 0) of 10 to 500 tensors, prints per network:

- opt_einsum's forward `contract_path` alone (greedy);
- `reverse` + `torch-autograd` analysis on the forward plan (derivation, FLOPs, the
  executor lowering and the schedule replay), and its ratio to `contract_path`
  (target: at most 2x at 500 tensors);
- the `independent` strategy's planning (one core per operand) and its full analysis;
- the default analysis, `analyze(equation, shapes)` with every strategy (what
  `einsum-analyze EQUATION --shapes ... --device none` computes), in wall and CPU seconds,
  and its ratio to `contract_path` (target, issue 10 item 8: at most 2 s at 500 tensors
  on the 2-core development machine).

A last row analyses the 1,000-operand Hadamard product `i,i,...,i->i` (sizes 3).

    python3 benchmarks/bench_backward_analysis.py [--repeats 5] [--max-tensors 500]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import opt_einsum
from opt_einsum.testing import rand_equation

from einsum_analyze import analyze
from einsum_analyze.model.equation import parse_equation
from einsum_analyze.model.planning import plan_contraction
from einsum_analyze.strategies import build_strategy, plan_gradients

HERE = Path(__file__).parent


def median_time(function, repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def median_both(function, repeats: int) -> tuple[float, float]:
    """Median wall and CPU (this process) seconds of ``function``."""
    wall, cpu = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        function()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return statistics.median(wall), statistics.median(cpu)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--max-tensors", type=int, default=500)
    args = parser.parse_args()
    sizes = json.loads((HERE / "cases.json").read_text())["scaling"]["n_tensors"]
    print(f"command: python3 benchmarks/bench_backward_analysis.py --repeats {args.repeats} "
          f"--max-tensors {args.max_tensors}")
    print(f"python {platform.python_version()}, {platform.platform()}, "
          f"{os.cpu_count()} CPUs, opt_einsum {opt_einsum.__version__}, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    header = ("| n | contract_path ms | reverse+torch-autograd ms | ratio | "
              "independent planning s | independent total s | independent optimizer | "
              "analyze (default) s, wall | CPU | ratio to contract_path (wall) |")
    print(header)
    print("|" + "---|" * 10)
    analyze("ab,bc->ac", [(2, 3), (3, 4)])  # imports and caches outside the clock
    for n in sizes:
        if n > args.max_tensors:
            continue
        text, shapes, _ = rand_equation(n, 3, seed=0, d_min=2, d_max=8,
                                        return_size_dict=True)
        row(text, shapes, f"{n}", args.repeats)
    if args.max_tensors >= 1000:
        row(",".join(["i"] * 1000) + "->i", [(3,)] * 1000, "1000 (i,i,...->i)", 1)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


def row(text: str, shapes, label: str, repeats: int) -> None:
    """One table row for the network ``text``."""
    equation = parse_equation(text, shapes)
    n = equation.num_operands
    plan = plan_contraction(equation, "greedy")
    grad = list(range(n))
    forward = median_time(
        lambda: opt_einsum.contract_path(text, *shapes, shapes=True, optimize="greedy"),
        repeats,
    )
    backward = median_time(
        lambda: [build_strategy(name, plan, grad, itemsize=4)
                 for name in ("reverse", "torch-autograd")],
        repeats,
    )
    start = time.perf_counter()
    gradients = plan_gradients(equation, grad, "greedy", forward=plan)
    build_strategy("independent", plan, grad, itemsize=4, gradients=gradients)
    total = time.perf_counter() - start
    wall, cpu = median_both(lambda: analyze(text, shapes, optimize="greedy"), repeats)
    print(f"| {label} | {forward * 1e3:.2f} | {backward * 1e3:.2f} | "
          f"{backward / forward:.2f} | {gradients.planning_s:.2f} | {total:.2f} | "
          f"{gradients.optimizer} | {wall:.2f} | {cpu:.2f} | {wall / forward:.0f} |",
          flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
