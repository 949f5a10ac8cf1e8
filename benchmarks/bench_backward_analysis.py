"""Backward analysis speed on the `scaling` networks of benchmarks/cases.json.

For random regular networks (opt_einsum.testing.rand_equation, regularity 3, sizes 2..8,
seed 0) of 10 to 500 tensors, prints per network:

- opt_einsum's forward `contract_path` alone (greedy);
- `reverse` + `torch-autograd` analysis on the forward plan (derivation, FLOPs, the
  executor lowering and the schedule replay), and its ratio to `contract_path`
  (target: at most 2x at 500 tensors);
- the `independent` strategy's planning (one core per operand) and its full analysis
  (target: under 30 s at 500 tensors).

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

from einsum_analyze.equation import parse_equation
from einsum_analyze.planning import plan_contraction
from einsum_analyze.strategies import build_strategy, plan_gradients

HERE = Path(__file__).parent


def median_time(function, repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--max-tensors", type=int, default=500)
    args = parser.parse_args()
    sizes = json.loads((HERE / "cases.json").read_text())["scaling"]["n_tensors"]
    print(f"python {platform.python_version()}, {platform.platform()}, "
          f"{os.cpu_count()} CPUs, opt_einsum {opt_einsum.__version__}")
    header = ("| n | contract_path ms | reverse+torch-autograd ms | ratio | "
              "independent planning s | independent total s | independent optimizer |")
    print(header)
    print("|" + "---|" * 7)
    for n in sizes:
        if n > args.max_tensors:
            continue
        text, shapes, _ = rand_equation(n, 3, seed=0, d_min=2, d_max=8,
                                        return_size_dict=True)
        equation = parse_equation(text, shapes)
        plan = plan_contraction(equation, "greedy")
        grad = list(range(n))
        forward = median_time(
            lambda: opt_einsum.contract_path(text, *shapes, shapes=True, optimize="greedy"),
            args.repeats,
        )
        backward = median_time(
            lambda: [build_strategy(name, plan, grad, itemsize=4)
                     for name in ("reverse", "torch-autograd")],
            args.repeats,
        )
        start = time.perf_counter()
        gradients = plan_gradients(equation, grad, "greedy", forward=plan)
        build_strategy("independent", plan, grad, itemsize=4, gradients=gradients)
        total = time.perf_counter() - start
        print(f"| {n} | {forward * 1e3:.2f} | {backward * 1e3:.2f} | "
              f"{backward / forward:.2f} | {gradients.planning_s:.2f} | {total:.2f} | "
              f"{gradients.optimizer} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
