#!/usr/bin/env python3
"""Benchmark the analysis-only path of einsum-analyze.

(a) Cold start of the analysis-only CLI on the ``tn18-b512`` case of
    ``benchmarks/cases.json``: ``python3 -m einsum_analyze EQUATION --shapes ... --json FILE``
    and the installed ``einsum-analyze`` script when it is on PATH, each a fresh process
    (``--device none`` is added where the CLI has ``--device``: it runs on cpu by default).
    Target: median at most 0.3 s. ``python3 -c pass`` and ``python3 -c "import
    opt_einsum"`` are timed alongside for context, and so is ``--strategy none``
    (forward only) where the CLI has that option.

(b) In-process: ``einsum_analyze.analyze(eq, shapes, optimize=opt)`` against
    ``opt_einsum.contract_path(eq, *shapes, shapes=True, optimize=opt)`` alone, on
    ``tn18-b512`` and on the random regular networks of the ``scaling`` entry
    (``opt_einsum.testing.rand_equation(n, 3, seed=0, d_min=2, d_max=8)``). Target: ratio
    of medians at most 1.2 for the forward analysis (``strategies=None``, what
    ``contract_path`` does too); the default ``analyze`` adds every backward strategy,
    whose speed ``bench_backward_analysis.py`` measures against its own targets. Both
    must choose the same path with the same FLOPs and the
    same largest intermediate (checked on every row). Also timed: ``analyze(...,
    strategies=None)`` (forward only, where ``analyze`` takes that argument) and ``path
    fn``, opt_einsum's raw path finder, the floor that both sides share. Where the parser
    rejects an equation, ``analyze`` is timed with ``parse_equation`` replaced by a
    function returning an ``Equation`` built directly (marked ``*``), so the rest of the
    pipeline is still measured.

(c) Where the time of ``analyze`` goes: one backward strategy at a time.

(d) Scaling (``benchmarks/analysis_scaling.py``): ``reverse`` + ``torch-autograd``
    analysis and the default analysis against ``contract_path`` on random regular
    networks of 10 to 2000 tensors, in CPU seconds, with the fitted exponent of each.
    Targets: ratio at most 3, exponent at most 1.3 from 100 to 2000 tensors, the default
    analysis at most 2 s at 500 tensors.

(e) With ``--compare-with ROOT`` (``benchmarks/analysis_compare.py``): the same analysis
    of this tree against the package under ROOT, child processes interleaved.

Method: every in-process sample is a batch of calls lasting at least ``--min-sample-ms``;
functions are interleaved round by round (A B C, then C B A, ...) after a warm-up, with the
garbage collector off during timed batches (as ``timeit`` does). A call slower than 0.1 s
gets fewer samples (at least 3, about ``--slow-budget`` seconds in all). Subprocesses are
interleaved the same way after one warm-up run each. Times are ``time.perf_counter`` wall
times; tables show the median and the interquartile range (IQR).

Usage::

    python3 benchmarks/bench_analysis.py [--repeats N] [--max-tensors N]
    python3 benchmarks/bench_analysis.py --only scaling [--scaling-sizes 10,100,...]
    python3 benchmarks/bench_analysis.py --only scaling --compare-with OLD_CHECKOUT
"""

# ruff: noqa: T201

from __future__ import annotations

import argparse
import contextlib
import gc
import inspect
import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from analysis_cold import COLD_CASE, print_cold, run_cold  # noqa: E402
from analysis_common import (  # noqa: E402
    direct_equation,
    environment,
    find_case,
    fmt_ms,
    fmt_s,
    load_cases,
    markdown_table,
    parser_bypassed,
    raw_path_fn,
    summarize,
)
from analysis_compare import check_other, print_compare, run_compare  # noqa: E402
from analysis_scaling import SIZES as SCALING_SIZES  # noqa: E402
from analysis_scaling import print_scaling, run_scaling  # noqa: E402

RATIO_TARGET = 1.2
SLOW_CALL_S = 0.1


# --------------------------------------------------------------------------- (b) in-process


def scaling_cases(
    cases: dict[str, Any], max_tensors: int
) -> list[tuple[str, str, list[tuple[int, ...]]]]:
    """(name, equation, shapes): tn18-b512, then the random regular networks."""
    from opt_einsum.testing import rand_equation

    tn = find_case(cases, COLD_CASE)
    out = [(COLD_CASE, tn["equation"], [tuple(s) for s in tn["shapes"]])]
    for n in cases["scaling"]["n_tensors"]:
        if n > max_tensors:
            continue
        eq, shapes, _ = rand_equation(n, 3, seed=0, d_min=2, d_max=8, return_size_dict=True)
        out.append((f"rand-reg3 n={n}", eq, [tuple(int(d) for d in s) for s in shapes]))
    return out


def time_interleaved(
    funcs: dict[str, Callable[[], Any]], repeats: int, min_sample_s: float, slow_budget_s: float
) -> dict[str, list[float]]:
    """Per-call seconds, interleaved, gc off; slow functions get fewer samples."""
    number: dict[str, int] = {}
    wanted: dict[str, int] = {}
    for name, func in funcs.items():
        start = time.perf_counter()
        func()  # warm-up, and a first estimate
        single = max(time.perf_counter() - start, 1e-7)
        if single < SLOW_CALL_S:
            start = time.perf_counter()
            func()
            single = max(time.perf_counter() - start, 1e-7)
        number[name] = max(1, math.ceil(min_sample_s / single))
        if single * number[name] < SLOW_CALL_S:
            wanted[name] = repeats
        else:
            wanted[name] = max(3, min(repeats, int(slow_budget_s / (single * number[name]))))
    names = list(funcs)
    samples: dict[str, list[float]] = {name: [] for name in names}
    gc.collect()
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for round_ in range(max(wanted.values())):
            for name in names if round_ % 2 == 0 else names[::-1]:
                if len(samples[name]) >= wanted[name]:
                    continue
                func, count = funcs[name], number[name]
                start = time.perf_counter()
                for _ in range(count):
                    func()
                samples[name].append((time.perf_counter() - start) / count)
            gc.collect()
    finally:
        if gc_was_enabled:
            gc.enable()
    return samples


def _same(
    plan: Any, ref_path: tuple[tuple[int, ...], ...], ref_flops: int, ref_largest: int
) -> str:
    bad = []
    if tuple(tuple(s) for s in plan.path) != ref_path:
        bad.append("path")
    if plan.flops != ref_flops:
        bad.append("FLOPs")
    if plan.largest_intermediate_elements != ref_largest:
        bad.append("largest")
    return "yes" if not bad else "NO: " + ",".join(bad)


def run_inprocess(
    cases: dict[str, Any],
    repeats: int,
    max_tensors: int,
    dp_max: int,
    min_sample_s: float,
    slow_budget_s: float,
    full_max: int,
) -> dict[str, Any]:
    """Time analyze() against contract_path() on every network and optimizer."""
    import opt_einsum

    import einsum_analyze
    from einsum_analyze.errors import EinsumAnalyzeError

    has_strategies = "strategies" in inspect.signature(einsum_analyze.analyze).parameters
    fwd_kwargs: dict[str, Any] = {"strategies": None} if has_strategies else {}
    rows = []
    for name, eq, shapes in scaling_cases(cases, max_tensors):
        optimizers = ["greedy", "auto"] + (["dp"] if len(shapes) <= dp_max else [])
        for opt in optimizers:
            path, info = opt_einsum.contract_path(eq, *shapes, shapes=True, optimize=opt)
            ref = (
                tuple(tuple(int(i) for i in step) for step in path),
                int(info.opt_cost),
                int(info.largest_intermediate),
            )
            row: dict[str, Any] = {
                "case": name,
                "n": len(shapes),
                "optimizer": opt,
                "flops": ref[1],
                "bypassed": False,
            }
            bypass: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
            try:
                einsum_analyze.analyze(eq, shapes, optimize=opt, **fwd_kwargs)
            except EinsumAnalyzeError as err:
                row["analyze_error"] = f"{type(err).__name__}: {err}"
                row["bypassed"] = True
                bypass = parser_bypassed(direct_equation(eq, shapes))
            funcs: dict[str, Callable[[], Any]] = {
                "contract_path": lambda eq=eq, shapes=shapes, opt=opt: opt_einsum.contract_path(
                    eq, *shapes, shapes=True, optimize=opt
                ),
            }
            full = len(shapes) <= full_max
            if full:
                funcs["analyze"] = lambda eq=eq, shapes=shapes, opt=opt: einsum_analyze.analyze(
                    eq, shapes, optimize=opt
                )
            if has_strategies:
                funcs["forward_only"] = lambda eq=eq, shapes=shapes, opt=opt: (
                    einsum_analyze.analyze(eq, shapes, optimize=opt, strategies=None)
                )
            funcs["path_fn"] = raw_path_fn(eq, shapes, opt)
            with bypass:
                for key in ("analyze", "forward_only"):
                    if key in funcs:
                        row[f"{key}_same"] = _same(funcs[key]().plan, *ref)
                samples = time_interleaved(funcs, repeats, min_sample_s, slow_budget_s)
            for key, values in samples.items():
                row[key] = summarize(values)
            base = row["contract_path"]["median"]
            for key in ("analyze", "forward_only"):
                if key in row:
                    row[f"{key}_ratio"] = row[key]["median"] / base
            # The target is the forward analysis (what contract_path does too); the
            # backward strategies have their own benchmark (bench_backward_analysis.py).
            row["met"] = (
                not row["bypassed"]
                and "forward_only_ratio" in row
                and row["forward_only_ratio"] <= RATIO_TARGET
            )
            rows.append(row)
    return {
        "rows": rows,
        "repeats": repeats,
        "min_sample_s": min_sample_s,
        "dp_max": dp_max,
        "full_max": full_max,
        "has_strategies": has_strategies,
    }


def print_inprocess(result: dict[str, Any]) -> None:
    """Print the in-process table and any rejected rows."""
    print(
        f"\n## (b) In-process: analyze() vs opt_einsum.contract_path(), ms per call "
        f"(median [IQR]; up to {result['repeats']} interleaved samples of >= "
        f"{result['min_sample_s'] * 1e3:.0f} ms; target: ratio <= {RATIO_TARGET})\n"
    )

    def cell(row: dict[str, Any], key: str) -> str:
        if key not in row:
            return "-"
        mark = "*" if row["bypassed"] and key in ("analyze", "forward_only") else ""
        return f"{fmt_ms(row[key]['median'])} [{fmt_ms(row[key]['iqr'])}]{mark}"

    def ratio(row: dict[str, Any], key: str) -> str:
        mark = "*" if row["bypassed"] else ""
        return f"{row[key]:.2f}{mark}" if key in row else "-"

    def same(row: dict[str, Any]) -> str:
        marks = {row[k] for k in ("analyze_same", "forward_only_same") if k in row}
        text = " / ".join(sorted(marks)) if marks else "-"
        return text + ("*" if row["bypassed"] else "")

    rows = []
    for row in result["rows"]:
        if row["met"]:
            met = "yes"
        elif row["bypassed"]:
            met = "NO (rejected)"
        elif "forward_only_ratio" not in row:
            met = "not timed"
        else:
            met = "NO"
        rows.append(
            [
                row["case"],
                row["optimizer"],
                cell(row, "contract_path"),
                cell(row, "analyze"),
                ratio(row, "analyze_ratio"),
                cell(row, "forward_only"),
                ratio(row, "forward_only_ratio"),
                met,
                cell(row, "path_fn"),
                same(row),
                f"{row['flops']:.3g}",
            ]
        )
    header = [
        "case",
        "optimizer",
        "contract_path",
        "analyze (default)",
        "ratio",
        "analyze fwd-only",
        "ratio fwd",
        "target met (fwd)",
        "path fn",
        "same path+FLOPs",
        "FLOPs",
    ]
    print(markdown_table(header, rows))
    print(
        "\nanalyze (default): analyze(eq, shapes, optimize=opt) with its default arguments"
        + (" (all backward strategies)" if result["has_strategies"] else "")
        + "; fwd-only: strategies=None; path fn: opt_einsum.paths.get_path_fn(opt) on "
        "prebuilt index sets; same path+FLOPs: the analysis's path, FLOPs and largest "
        "intermediate equal contract_path's."
    )
    if any(r["n"] > result["full_max"] for r in result["rows"]):
        print(
            f"analyze (default) is not timed for n > {result['full_max']} (--full-max): "
            "one call takes longer than the whole benchmark budget (see section c)."
        )
    errors = sorted({(r["n"], r["analyze_error"]) for r in result["rows"] if "analyze_error" in r})
    if errors:
        print(
            "* analyze() REJECTED these equations; the starred figures time the same "
            "analyze() with parse_equation replaced by a prebuilt Equation:"
        )
        for n, message in errors:
            print(f"    n={n}: {message}")
    print(
        f"'dp' is timed only for n <= {result['dp_max']} (--dp-max): on the n=50 network "
        "opt_einsum's dp did not finish within 120 s."
    )


# --------------------------------------------------------------------------- (c) breakdown


def run_breakdown(
    cases: dict[str, Any],
    repeats: int,
    min_sample_s: float,
    slow_budget_s: float,
    sizes: Sequence[int],
) -> dict[str, Any] | None:
    """Time analyze(optimize='greedy') with one backward strategy at a time."""
    import einsum_analyze
    from einsum_analyze.errors import EinsumAnalyzeError

    if "strategies" not in inspect.signature(einsum_analyze.analyze).parameters:
        return None
    try:
        from einsum_analyze.strategies import STRATEGIES
    except ImportError:
        return None
    variants: list[tuple[str, Any]] = [("none (forward only)", None)]
    variants += [(name, (name,)) for name in STRATEGIES]
    variants.append(("default (all)", "default"))
    rows = []
    for name, eq, shapes in scaling_cases(cases, max(sizes, default=0)):
        if name != COLD_CASE and len(shapes) not in sizes:
            continue
        bypass: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
        bypassed = False
        try:
            einsum_analyze.analyze(eq, shapes, optimize="greedy", strategies=None)
        except EinsumAnalyzeError:
            bypass, bypassed = parser_bypassed(direct_equation(eq, shapes)), True
        funcs: dict[str, Callable[[], Any]] = {}
        for label, value in variants:
            if value == "default":
                funcs[label] = lambda eq=eq, shapes=shapes: einsum_analyze.analyze(
                    eq, shapes, optimize="greedy"
                )
            else:
                funcs[label] = lambda eq=eq, shapes=shapes, value=value: einsum_analyze.analyze(
                    eq, shapes, optimize="greedy", strategies=value
                )
        with bypass:
            samples = time_interleaved(funcs, repeats, min_sample_s, slow_budget_s)
        rows.append(
            {
                "case": name + ("*" if bypassed else ""),
                "n": len(shapes),
                **{label: summarize(values) for label, values in samples.items()},
            }
        )
    return {"rows": rows, "variants": [label for label, _ in variants]}


def print_breakdown(result: dict[str, Any]) -> None:
    """Print the per-strategy table."""
    print(
        "\n## (c) Where analyze()'s time goes: analyze(eq, shapes, optimize='greedy', "
        "strategies=...) per strategy, ms per call (median [IQR])\n"
    )
    rows = []
    for row in result["rows"]:
        rows.append(
            [row["case"]]
            + [f"{fmt_ms(row[v]['median'])} [{fmt_ms(row[v]['iqr'])}]" for v in result["variants"]]
        )
    print(markdown_table(["case"] + result["variants"], rows))
    if any(r["case"].endswith("*") for r in result["rows"]):
        print("* parse_equation bypassed (the parser rejects this equation).")


def run_profile(cases: dict[str, Any], top: int) -> None:
    """cProfile one default analyze() call on tn18-b512 and print the top functions."""
    import cProfile
    import pstats

    import einsum_analyze

    case = find_case(cases, COLD_CASE)
    einsum_analyze.analyze(case["equation"], case["shapes"], optimize="greedy")
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(20):
        einsum_analyze.analyze(case["equation"], case["shapes"], optimize="greedy")
    profiler.disable()
    print(f"\n## cProfile: 20 x analyze({COLD_CASE}, optimize='greedy'), defaults\n")
    pstats.Stats(profiler, stream=sys.stdout).sort_stats("cumulative").print_stats(top)


# --------------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmarks and print the tables; the exit code reflects --check."""
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--repeats", type=int, default=11, help="timed samples per command / function (default 11)"
    )
    parser.add_argument(
        "--max-tensors", type=int, default=500, help="largest random network to time (default 500)"
    )
    parser.add_argument(
        "--full-max",
        type=int,
        default=100,
        help="time the default analyze() (all backward strategies) only on "
        "networks of at most this many tensors (default 100)",
    )
    parser.add_argument(
        "--dp-max",
        type=int,
        default=10,
        help="also time optimizer 'dp' on networks of at most this many tensors (default 10)",
    )
    parser.add_argument(
        "--min-sample-ms",
        type=float,
        default=20.0,
        help="each in-process sample is a batch lasting at least this long (default 20)",
    )
    parser.add_argument(
        "--slow-budget",
        type=float,
        default=4.0,
        help="seconds of samples for a function slower than 0.1 s per call "
        "(at least 3 samples; default 4)",
    )
    parser.add_argument(
        "--breakdown-sizes",
        default="10,50,100",
        help="random networks (by n) for the per-strategy table (c); '' "
        "for tn18-b512 only (default 10,50,100)",
    )
    parser.add_argument(
        "--only", choices=["cold", "inprocess", "breakdown", "scaling"],
        help="run one of the measurements",
    )
    parser.add_argument(
        "--scaling-sizes",
        default=",".join(map(str, SCALING_SIZES)),
        help="random networks (by n) for the scaling table (d) (default %(default)s)",
    )
    parser.add_argument(
        "--scaling-repeats", type=int, default=3,
        help="samples of each function per network in (d) (default 3)",
    )
    parser.add_argument(
        "--compare-with", metavar="ROOT", type=Path,
        help="also time this tree against the package under ROOT (an older checkout): the "
        "cold start's CLI runs, and the scaling's analyses in child processes (section e); "
        "each interleaved with this tree's",
    )
    parser.add_argument(
        "--compare-rounds", type=int, default=4,
        help="children of each side in (e) (default 4)",
    )
    parser.add_argument(
        "--profile", action="store_true", help="also cProfile the default analyze() on tn18-b512"
    )
    parser.add_argument("--json", metavar="PATH", help="also write all results as JSON")
    parser.add_argument(
        "--check",
        action="store_true",
        help="exit 1 when a target is missed (a path/FLOPs mismatch always exits 1)",
    )
    args = parser.parse_args(argv)
    problem = None if args.compare_with is None else check_other(args.compare_with.resolve())
    if problem is not None:
        parser.error(problem)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    breakdown_sizes = [int(x) for x in args.breakdown_sizes.split(",") if x.strip()]

    started = time.perf_counter()
    cases = load_cases()
    env = environment()
    print("# einsum-analyze analysis benchmark\n")
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}")
    for key, value in env.items():
        print(f"{key}: {value}")

    results: dict[str, Any] = {"environment": env, "argv": sys.argv}
    failed_check = False
    missed = False
    if args.only in (None, "cold"):
        cold = run_cold(find_case(cases, COLD_CASE), args.repeats, summarize,
                        args.compare_with.resolve() if args.compare_with else None)
        print_cold(cold, markdown_table, fmt_s)
        results["cold"] = cold
        failed_check |= bool(cold["problems"])
        missed |= any(r["met"] is False for r in cold["rows"])
    if args.only in (None, "inprocess"):
        inproc = run_inprocess(
            cases,
            args.repeats,
            args.max_tensors,
            args.dp_max,
            args.min_sample_ms / 1e3,
            args.slow_budget,
            args.full_max,
        )
        print_inprocess(inproc)
        results["inprocess"] = inproc
        for row in inproc["rows"]:
            failed_check |= any(
                str(row.get(k, "")).startswith("NO") for k in ("analyze_same", "forward_only_same")
            )
            missed |= not row["met"]
    if args.only in (None, "breakdown"):
        breakdown = run_breakdown(
            cases,
            args.repeats,
            args.min_sample_ms / 1e3,
            args.slow_budget,
            [n for n in breakdown_sizes if n <= args.max_tensors],
        )
        if breakdown is not None:
            print_breakdown(breakdown)
            results["breakdown"] = breakdown
    if args.only in (None, "scaling"):
        sizes = [int(x) for x in args.scaling_sizes.split(",") if x.strip()]
        scaling = run_scaling(sizes, args.scaling_repeats)
        missed |= not print_scaling(scaling, markdown_table)
        results["scaling"] = scaling
        if args.compare_with is not None:
            compared = run_compare(args.compare_with.resolve(), sizes, args.compare_rounds)
            print_compare(compared, markdown_table)
            results["compare"] = compared
    if args.profile:
        run_profile(cases, 25)

    elapsed = time.perf_counter() - started
    results["elapsed_s"] = elapsed
    print(f"\ntotal benchmark time: {elapsed:.1f} s")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as stream:
            json.dump(results, stream, indent=2, sort_keys=True, default=str)
            stream.write("\n")
    if failed_check:
        print("FAILED: einsum_analyze and opt_einsum disagree on a path or FLOPs (see above)")
        return 1
    if args.check and missed:
        print("a target was missed (--check)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
