"""Section (d) of bench_analysis.py: how the backward analysis scales with the network.

On random regular networks (``opt_einsum.testing.rand_equation(n, 3, seed=0, d_min=2,
d_max=8)``) of n = 10 to 2000 tensors, three functions are timed, interleaved round by
round in one process, as CPU seconds of this process (``time.process_time``: other jobs
on the machine do not count) and wall seconds:

- ``contract_path``: ``opt_einsum.contract_path(eq, *shapes, shapes=True,
  optimize="greedy")``, the baseline;
- ``reverse+torch-autograd``: ``analyze(eq, shapes, optimize="greedy",
  strategies=("reverse", "torch-autograd"))``: the forward plan, both strategies' schedules,
  the lowering, the memory replays;
- ``default``: ``analyze(eq, shapes, optimize="greedy")`` with the default strategies
  (``independent`` among them up to 200 operands).

Targets (issue 21): reverse+torch-autograd at most 3x contract_path at every n; its time
growing no faster than n^1.3 from 100 to 2000 (a least-squares fit of log time on log n);
the default analysis at most 2 s at 500 tensors.
"""

from __future__ import annotations

import gc
import math
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

SIZES = (10, 100, 200, 500, 1000, 2000)
RATIO_TARGET = 3.0
EXPONENT_TARGET = 1.3
DEFAULT_TARGET_S = 2.0


def _once(function: Callable[[], Any]) -> tuple[float, float]:
    gc.collect()
    gc.disable()
    try:
        wall, cpu = time.perf_counter(), time.process_time()
        function()
        return time.process_time() - cpu, time.perf_counter() - wall
    finally:
        gc.enable()


def _fit(points: Sequence[tuple[int, float]]) -> float:
    """Slope of log(time) on log(n), least squares."""
    xs = [math.log(n) for n, _ in points]
    ys = [math.log(max(t, 1e-9)) for _, t in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return (sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
            / sum((x - mx) ** 2 for x in xs))


def run_scaling(sizes: Sequence[int], repeats: int) -> dict[str, Any]:
    """Time the three functions on each network; the rows and the fitted exponents."""
    import opt_einsum
    from opt_einsum.testing import rand_equation

    from einsum_analyze import analyze

    analyze("ab,bc->ac", [(2, 3), (3, 4)])  # imports and first-call caches off the clock
    rows = []
    for n in sizes:
        eq, shapes = rand_equation(n, 3, seed=0, d_min=2, d_max=8)
        functions: dict[str, Callable[[], Any]] = {
            "contract_path": lambda eq=eq, shapes=shapes: opt_einsum.contract_path(
                eq, *shapes, shapes=True, optimize="greedy"),
            "reverse+torch-autograd": lambda eq=eq, shapes=shapes: analyze(
                eq, shapes, optimize="greedy", strategies=("reverse", "torch-autograd")),
            "default": lambda eq=eq, shapes=shapes: analyze(eq, shapes, optimize="greedy"),
        }
        cpu: dict[str, list[float]] = {name: [] for name in functions}
        wall: dict[str, list[float]] = {name: [] for name in functions}
        order = list(functions)
        for round_ in range(repeats):
            for name in order if round_ % 2 == 0 else order[::-1]:
                spent, waited = _once(functions[name])
                cpu[name].append(spent)
                wall[name].append(waited)
        report = analyze(eq, shapes, optimize="greedy")
        rows.append({
            "n": n,
            "default_strategies": [s.name for s in report.strategies],
            **{f"{name}_cpu_s": statistics.median(cpu[name]) for name in functions},
            **{f"{name}_wall_s": statistics.median(wall[name]) for name in functions},
        })
    fitted = [(row["n"], row["reverse+torch-autograd_cpu_s"]) for row in rows
              if row["n"] >= 100]
    baseline = [(row["n"], row["contract_path_cpu_s"]) for row in rows if row["n"] >= 100]
    return {
        "rows": rows,
        "repeats": repeats,
        "exponent": _fit(fitted) if len(fitted) >= 2 else None,
        "contract_path_exponent": _fit(baseline) if len(baseline) >= 2 else None,
    }


def print_scaling(result: dict[str, Any], table: Callable[..., str]) -> bool:
    """Print the table; whether every target was met."""
    print(f"\n## (d) Scaling: random regular networks, greedy, CPU seconds of this process "
          f"(median of {result['repeats']}, interleaved; wall in brackets)\n")
    rows = []
    met = True
    for row in result["rows"]:
        ours, base = row["reverse+torch-autograd_cpu_s"], row["contract_path_cpu_s"]
        ratio = ours / max(base, 1e-9)
        met &= ratio <= RATIO_TARGET
        default = row["default_cpu_s"]
        if row["n"] == 500:
            met &= default <= DEFAULT_TARGET_S
        rows.append([
            str(row["n"]),
            f"{base * 1e3:.1f} [{row['contract_path_wall_s'] * 1e3:.1f}]",
            f"{ours * 1e3:.1f} [{row['reverse+torch-autograd_wall_s'] * 1e3:.1f}]",
            f"{ratio:.2f}" + ("" if ratio <= RATIO_TARGET else " (target 3)"),
            f"{default * 1e3:.1f} [{row['default_wall_s'] * 1e3:.1f}]",
            ",".join(row["default_strategies"]),
        ])
    print(table(["n", "contract_path ms", "reverse+torch-autograd ms", "ratio",
                 "default ms", "default strategies"], rows))
    exponent, base_exponent = result["exponent"], result["contract_path_exponent"]
    if exponent is not None:
        met &= exponent <= EXPONENT_TARGET
        print(f"\nfitted exponent, 100 to 2000 tensors: reverse+torch-autograd n^{exponent:.2f} "
              f"(target <= {EXPONENT_TARGET}); contract_path n^{base_exponent:.2f}")
    print(f"targets: ratio <= {RATIO_TARGET} at every n; exponent <= {EXPONENT_TARGET}; "
          f"default <= {DEFAULT_TARGET_S} s at 500 tensors: "
          f"{'all met' if met else 'NOT all met'}")
    return met
