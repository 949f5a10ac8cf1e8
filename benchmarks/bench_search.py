#!/usr/bin/env python3
"""Benchmark the training-aware search, the limit sweep and the budget (analysis only, CPU).

(a) ``tn18-b512`` of ``benchmarks/cases.json``, every operand differentiated,
    ``objective="flops"``: the recommended plan's training FLOPs against reverse mode on
    opt_einsum's ``auto``, ``dp`` and ``dp`` with outer products paths (that last path is
    stored below: opt_einsum takes 25 to 34 s to find it; ``--recompute-dp-outer`` finds
    it again). Targets: recommended <= reverse on dp-with-outer; wall <= 0.5 s.
(b) ``tn18-b512`` with ``grad="9-17"`` (the parameters), ``objective="memory"``: the
    recommended training peak against reverse mode's on the greedy, dp and
    dp-with-outer paths. Target: at most the least of the three.
(c) Against cotengra (when installed): on the random regular networks of the ``scaling``
    entry (10 to 200 tensors; ``opt_einsum.testing.rand_equation(n, 3, seed=0, d_min=2,
    d_max=8)``) and the shared cases, cotengra's ``flops``, ``write`` and ``combo`` trees
    (HyperOptimizer, greedy method, in process) scored by our model (reverse mode); no
    point of our Pareto front may be dominated by one of them. Ratios: our least training
    FLOPs and least peak over cotengra's best, per network; the search runs without and
    with ``cotengra=True`` (its candidates then hold those same seeded trees, re-contracted
    further by our sub-tree program).
(e) The search's deadline: on ``tn18-b512`` under a 50 KiB budget, the search's own
    seconds against ``--max-search-time`` 0.25, 1 and 3 (bound: +10% and 50 ms), the wall
    time of ``bash examples/tn18_b512.sh --device none --budget 50KiB`` (target 2 s), and
    ``bc,bd,cm,mdn->bn`` at 45 KiB; then the sliced fallback's deadline: ``mps-layer`` at
    50 KiB with 1 s and ``tn18-b512`` at 50 KiB with 2 s, and every case of
    ``cases.json`` at the midpoint between the floor (inputs, upstream and gradients) and
    the least peak of the unsliced plans (``objective="memory"``, no budget), with 1 s:
    each search's seconds against its bound (``--deadline-only`` runs this section alone).
(d) Analysis time at 200 tensors: ``analyze`` alone, then with ``objective="flops"``, then
    with the limit sweep ``"none,max_input"`` as well. Target: at most 2 s more.

Each timing is the median of ``--repeats`` calls (``time.perf_counter``, wall); the
machine may be shared, so the environment and load average are printed.

Usage::

    python3 benchmarks/bench_search.py [--repeats N] [--max-tensors N] [--json PATH]
    python3 benchmarks/bench_search.py --timing-only --repeats 5   # section (d) alone
"""

# ruff: noqa: T201

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from einsum_analyze import analyze  # noqa: E402
from einsum_analyze.model.equation import parse_equation  # noqa: E402
from einsum_analyze.model.planning import Plan, plan_contraction  # noqa: E402
from einsum_analyze.search import (  # noqa: E402
    cotengra_available,
    floor_bytes,
    pareto_front,
    score_path,
)
from einsum_analyze.search.candidates import cotengra_path  # noqa: E402
from einsum_analyze.strategies import build_strategy  # noqa: E402

DP_OUTER_PATH = [(0, 1), (0, 1), (14, 15), (5, 6), (5, 13), (5, 12), (10, 11), (1, 2), (1, 2),
                 (7, 8), (4, 5), (3, 6), (2, 5), (3, 4), (2, 3), (1, 2), (0, 1)]
SEARCH_TARGET_S = 0.5
ADDED_TARGET_S = 2.0


def timed(fn: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    """Median wall seconds of ``repeats`` calls, and the last result."""
    samples, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples), result


def table(title: str, headers: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    print(f"\n{title}")
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))


def reverse_figures(eq: Any, path: Any, grad: Any) -> tuple[int, int]:
    result = build_strategy("reverse", Plan.from_path(eq, path), grad, itemsize=4)
    return result.forward_flops + result.backward_flops, result.memory.peak_bytes


def tn18_section(case: dict[str, Any], repeats: int, recompute: bool) -> dict[str, Any]:
    eq = parse_equation(case["equation"], case["shapes"])
    outer = DP_OUTER_PATH
    if recompute:
        import opt_einsum

        outer, _ = opt_einsum.contract_path(
            case["equation"], *case["shapes"], shapes=True,
            optimize=opt_einsum.DynamicProgramming(search_outer=True))
    paths = {"auto (greedy)": plan_contraction(eq, "auto", None).path,
             "dp": plan_contraction(eq, "dp", None).path, "dp with outer products": outer}
    out: dict[str, Any] = {}
    rows = []
    for label, grad, objective in (("all operands", tuple(range(18)), "flops"),
                                   ("grad 9-17", tuple(range(9, 18)), "memory")):
        refs = {name: reverse_figures(eq, p, grad) for name, p in paths.items()}
        seconds, report = timed(lambda g=grad, o=objective: analyze(
            case["equation"], case["shapes"], grad=list(g), objective=o), repeats)
        rec = report.recommended.plan
        search_s = report.search.search_s
        if objective == "flops":
            target = refs["dp with outer products"][0]
            got, ok = rec.training_flops, rec.training_flops <= target
            ok_time = search_s <= SEARCH_TARGET_S
        else:
            target = min(peak for _, peak in refs.values())
            got, ok = rec.peak_bytes, rec.peak_bytes <= target
            ok_time = True
        for name, (flops, peak) in refs.items():
            rows.append([label, f"reverse on {name}", f"{flops:.4g}", f"{peak:,}", "", ""])
        rows.append([label, f"recommended ({objective}): {rec.strategy} on {rec.source}",
                     f"{rec.training_flops:.4g}", f"{rec.peak_bytes:,}",
                     f"{seconds:.3f} / {search_s:.3f}",
                     ("PASS" if ok and ok_time else "FAIL")])
        out[label] = {"objective": objective, "target": target, "value": got, "passed": ok,
                      "analyze_s": seconds, "search_s": search_s,
                      "references": {k: {"training_flops": f, "peak_bytes": p}
                                     for k, (f, p) in refs.items()}}
    table("(a, b) tn18-b512: training FLOPs and peak (float32, inputs included)",
          ["operands", "plan", "train FLOPs", "peak B", "analyze / search s", "target"], rows)
    return out


def cotengra_section(networks: list[tuple[str, str, list[Any]]]) -> dict[str, Any]:
    if not cotengra_available():
        print("\n(c) cotengra is not installed: skipped (pip install einsum-analyze[cotengra])")
        return {"skipped": "cotengra not installed"}
    rows, out = [], {}
    for name, equation, shapes in networks:
        eq = parse_equation(equation, shapes)
        if eq.num_operands < 3:
            continue
        grad = tuple(range(eq.num_operands))
        theirs = {}
        for minimize in ("flops", "write", "combo"):
            path = cotengra_path(eq, minimize)  # seeded: the trees the search sees
            if path is not None:
                theirs[minimize] = score_path(Plan.from_path(eq, path), grad, "reverse",
                                              itemsize=4, source=f"cotengra-{minimize}")
        for use in (False, True):
            start = time.perf_counter()
            report = analyze(equation, shapes, objective="flops", cotengra=use,
                             strategies=["reverse"])
            wall = time.perf_counter() - start
            front = pareto_front(report.search.pareto) if report.search else ()
            dominated = [
                (p.training_flops, p.peak_bytes) for p in front
                if any(t.training_flops <= p.training_flops and t.peak_bytes <= p.peak_bytes
                       and (t.training_flops, t.peak_bytes) != (p.training_flops, p.peak_bytes)
                       for t in theirs.values())
            ]
            best_f = min(p.training_flops for p in front)
            best_p = min(p.peak_bytes for p in front)
            their_f = min(t.training_flops for t in theirs.values())
            their_p = min(t.peak_bytes for t in theirs.values())
            rows.append([name, "with" if use else "without", f"{best_f / their_f:.3g}",
                         f"{best_p / their_p:.3g}", str(len(dominated)), f"{wall:.2f}",
                         "PASS" if not dominated else "FAIL"])
            out[f"{name} {'with' if use else 'without'} cotengra"] = {
                "flops_ratio": best_f / their_f, "peak_ratio": best_p / their_p,
                "dominated": len(dominated), "analyze_s": wall}
    table("(c) our Pareto front against cotengra's flops/write/combo trees (reverse mode; "
          "ratios: ours / cotengra's best; < 1 is better)",
          ["network", "cotengra in search", "FLOPs ratio", "peak ratio", "dominated",
           "analyze s", "target"], rows)
    return out


def timing_section(n: int, repeats: int) -> dict[str, Any]:
    """Analysis time at ``n`` tensors: wall (the target's figure) and this process's CPU
    seconds (what the analysis itself costs on a shared machine), medians."""
    import opt_einsum.testing

    equation, shapes = opt_einsum.testing.rand_equation(n, 3, seed=0, d_min=2, d_max=8)
    rows, out = [], {}

    def both(fn: Callable[[], Any]) -> tuple[float, float]:
        walls, cpus = [], []
        for _ in range(repeats):
            wall, cpu = time.perf_counter(), time.process_time()
            fn()
            walls.append(time.perf_counter() - wall)
            cpus.append(time.process_time() - cpu)
        return statistics.median(walls), statistics.median(cpus)

    for strategies in (None, ["reverse"]):
        kw: dict[str, Any] = {} if strategies is None else {"strategies": strategies}
        base = both(lambda kw=kw: analyze(equation, shapes, **kw))
        search = both(lambda kw=kw: analyze(equation, shapes, objective="flops", **kw))
        sweep = both(lambda kw=kw: analyze(equation, shapes, objective="flops",
                                           memory_limit="none,max_input", **kw))
        label = "default strategies" if strategies is None else "reverse only"
        added = sweep[0] - base[0]
        rows.append([label, f"{base[0]:.2f} ({base[1]:.2f})",
                     f"{search[0] - base[0]:+.2f} ({search[1] - base[1]:+.2f})",
                     f"{added:+.2f} ({sweep[1] - base[1]:+.2f})",
                     "PASS" if added <= ADDED_TARGET_S else "FAIL"])
        out[label] = {"analyze_s": base[0], "search_added_s": search[0] - base[0],
                      "sweep_and_search_added_s": added, "analyze_cpu_s": base[1],
                      "search_added_cpu_s": search[1] - base[1],
                      "sweep_and_search_added_cpu_s": sweep[1] - base[1]}
    table(f"(d) analysis time at {n} tensors (median of {repeats}; wall seconds, CPU "
          "seconds in brackets)",
          ["strategies", "analyze", "+ search", "+ sweep none,max_input + search", "target"],
          rows)
    return out


DEADLINE_TOLERANCE = (1.1, 0.05)
"""The issue's bound on the whole search: within --max-search-time, +10% and 50 ms."""

CLI_TARGET_S = 2.0
"""The issue's target for ``bash examples/tn18_b512.sh --device none --budget 50KiB``."""


def deadline_section(tn18: dict[str, Any], repeats: int,
                     cases: list[dict[str, Any]]) -> dict[str, Any]:
    """(e) The search's deadline: search seconds against --max-search-time, and the CLI."""
    import subprocess

    rows, out = [], []
    shapes = [tuple(s) for s in tn18["shapes"]]
    for seconds in (0.25, 1.0, 3.0):
        wall, report = timed(lambda s=seconds: analyze(tn18["equation"], shapes,
                                                       budget="50KiB", max_search_s=s),
                             repeats)
        bound = DEADLINE_TOLERANCE[0] * seconds + DEADLINE_TOLERANCE[1]
        found = report.search.search_s
        rec = report.recommended
        rows.append([f"{seconds:g}", f"{found:.3f}", f"{bound:.3f}",
                     "ok" if found <= bound else "MISS", f"{wall:.3f}",
                     f"{rec.plan.strategy} {rec.plan.peak_bytes:,} B"])
        out.append({"max_search_s": seconds, "search_s": found, "bound_s": bound,
                    "analysis_s": wall, "strategy": rec.plan.strategy,
                    "peak_bytes": rec.plan.peak_bytes, "fits": rec.fits})
    table("(e) tn18-b512 under a 50 KiB budget: the whole search against its time",
          ["max-search-time", "search s", "bound s", "", "analyze s", "smallest peak"], rows)
    command = ["bash", str(HERE.parent / "examples" / "tn18_b512.sh"), "--device", "none",
               "--budget", "50KiB"]
    walls = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(command, capture_output=True, check=False)
        walls.append(time.perf_counter() - start)
    cli = statistics.median(walls)
    print(f"{' '.join(command[1:])}: {cli:.2f} s wall (median of {repeats}; target "
          f"{CLI_TARGET_S:g} s: {'ok' if cli <= CLI_TARGET_S else 'MISS'})")
    repro = analyze("bc,bd,cm,mdn->bn", [(512, 2), (512, 2), (2, 7), (7, 2, 7)],
                    budget="45KiB")
    assert repro.recommended is not None
    print(f"bc,bd,cm,mdn->bn at 45 KiB: fits {repro.recommended.fits}, "
          f"{repro.recommended.plan.strategy} at {repro.recommended.plan.peak_bytes:,} B")
    fallback = fallback_section(cases)
    return {"rows": out, "cli_wall_s": cli, "repro_peak_bytes":
            repro.recommended.plan.peak_bytes, "repro_fits": repro.recommended.fits,
            "fallback": fallback}


FALLBACK_RUNS = (("mps-layer", "50KiB", 1.0), ("tn18-b512", "50KiB", 2.0))
"""The sliced fallback's overshoots measured on 2026-12-02 (1.41 s and 2.92 s)."""


def fallback_section(cases: list[dict[str, Any]], seconds: float = 1.0) -> list[dict[str, Any]]:
    """The sliced fallback's deadline: named runs, then every case below the unsliced floor."""
    by_name = {c["name"]: c for c in cases}
    runs: list[tuple[str, int | str, float]] = list(FALLBACK_RUNS)
    for case in cases:
        shapes = [tuple(s) for s in case["shapes"]]
        equation = parse_equation(case["equation"], shapes)
        floor = floor_bytes(equation, range(equation.num_operands), 4)
        least = analyze(case["equation"], shapes, objective="memory").recommended
        assert least is not None
        runs.append((case["name"], (floor + least.plan.peak_bytes) // 2, seconds))
    rows, out = [], []
    for name, budget, limit in runs:
        case = by_name[name]
        wall, report = timed(lambda c=case, b=budget, s=limit: analyze(
            c["equation"], [tuple(x) for x in c["shapes"]], budget=b, max_search_s=s), 1)
        rec = report.recommended
        assert rec is not None
        bound = DEADLINE_TOLERANCE[0] * limit + DEADLINE_TOLERANCE[1]
        found = report.search.search_s
        slices = (rec.plan.result.details["slicing"]["count"]
                  if rec.plan.strategy == "sliced" else 1)
        text = budget if isinstance(budget, str) else f"{budget:,} B"
        rows.append([name, text, f"{limit:g}", f"{found:.3f}", f"{bound:.3f}",
                     "ok" if found <= bound else "MISS", f"{wall:.3f}",
                     f"{rec.plan.strategy} x{slices} {rec.plan.peak_bytes:,} B",
                     "yes" if rec.fits else "no"])
        out.append({"case": name, "budget": budget, "max_search_s": limit, "search_s": found,
                    "bound_s": bound, "analysis_s": wall, "strategy": rec.plan.strategy,
                    "slices": slices, "peak_bytes": rec.plan.peak_bytes, "fits": rec.fits})
    table(f"(e) the sliced fallback's deadline: named runs, then every case at the midpoint "
          f"between the floor and the least unsliced peak, {seconds:g} s",
          ["case", "budget", "max-search-time", "search s", "bound s", "", "analyze s",
           "recommended", "fits"], rows)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-tensors", type=int, default=200)
    parser.add_argument("--recompute-dp-outer", action="store_true")
    parser.add_argument("--json", metavar="PATH")
    parser.add_argument("--timing-only", action="store_true",
                        help="run section (d) alone")
    parser.add_argument("--deadline-only", action="store_true",
                        help="run section (e) alone")
    args = parser.parse_args()
    cases = json.loads((HERE / "cases.json").read_text())
    import opt_einsum

    print(f"python {platform.python_version()}, {platform.platform()}, opt_einsum "
          f"{opt_einsum.__version__}, cotengra "
          f"{'installed' if cotengra_available() else 'not installed'}, "
          f"{os.cpu_count()} cpus, load average {os.getloadavg()}")
    if args.timing_only:
        timing = timing_section(min(200, args.max_tensors), args.repeats)
        if args.json:
            Path(args.json).write_text(json.dumps({"timing": timing}, indent=2,
                                                  sort_keys=True) + "\n")
        return
    tn18 = next(c for c in cases["cases"] if c["name"] == "tn18-b512")
    if args.deadline_only:
        deadline = deadline_section(tn18, args.repeats, cases["cases"])
        if args.json:
            Path(args.json).write_text(json.dumps({"deadline": deadline}, indent=2,
                                                  sort_keys=True) + "\n")
        return
    results: dict[str, Any] = {"deadline": deadline_section(tn18, args.repeats, cases["cases"])}
    results["tn18"] = tn18_section(tn18, args.repeats, args.recompute_dp_outer)
    import opt_einsum.testing

    networks = [(f"random-{n}", *opt_einsum.testing.rand_equation(n, 3, seed=0, d_min=2,
                                                                   d_max=8))
                for n in cases["scaling"]["n_tensors"] if n <= args.max_tensors]
    networks += [(c["name"], c["equation"], c["shapes"]) for c in cases["cases"]]
    results["cotengra"] = cotengra_section(networks)
    results["timing"] = timing_section(min(200, args.max_tensors), args.repeats)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
