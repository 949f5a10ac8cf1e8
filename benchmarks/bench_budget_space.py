#!/usr/bin/env python3
"""The explored space at a budget: every plan the model scores, and the fastest that fits.

For each case of ``benchmarks/cases.json`` (float32, every operand differentiated), at the
budget of ``bench_training.py`` (B = F + share * (P - F); F: the step's floor, inputs,
upstream gradient, returned gradients and the forward's output; P: eager torch's peak,
here the ``torch-autograd`` model's, which the CPU allocator matches), the model scores:

- every candidate path of the search (:func:`einsum_analyze.search.candidate_paths`, the
  limit sweep down to one element included) with every strategy our executor runs
  besides slicing (``checkpoint`` given the budget);
- ``sliced`` on three paths: the forward path and those of least peak (the search's
  fallback slices the first two of these), then the fastest plan's: every label,
  chunks halving from the label's size down to ``--max-slices`` slices, each slice
  run by reverse mode or by checkpoint, fused or not; with ``--pairs``, every two
  labels together (2, 4 or 8 slices each, reverse mode, fused); and the slice
  finder's own choice at the budget.

Printed: how many plans, how many fit B, the least peak of the plans that are not
sliced, and the fastest plans that fit, each with its predicted time on the profile and
its ratio to the no-budget recommendation's (``analyze(objective="time")``) predicted
time. With ``--device cpu|cuda`` the no-budget recommendation and the ``--measure``
fastest fitting plans are run (``execute``, ``--repeats``): their measured time and peak
beside the prediction (peaks: the executor's measurement, inputs included).

Usage::

    python benchmarks/bench_budget_space.py --cases tucker,tn18-b512 --roofline h200
    python benchmarks/bench_budget_space.py --cases tucker --device cuda --measure 4
"""

# ruff: noqa: T201

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from _common import scaled, select_cases  # noqa: E402

from einsum_analyze import analyze, execute  # noqa: E402
from einsum_analyze.model.planning import Plan  # noqa: E402
from einsum_analyze.roofline import NOMINAL, DeviceProfile  # noqa: E402
from einsum_analyze.search import (  # noqa: E402
    candidate_paths,
    floor_bytes,
    score_path,
    sweep_limits,
    torch_model,
)

PAIR_WAYS = (2, 4, 8)
"""With ``--pairs``: the slices of each of two labels sliced together."""

UNSLICED = ("reverse", "checkpoint", "recompute")
"""The strategies scored on every path (slicing apart)."""


def space(case: dict[str, Any], share: float, profile: DeviceProfile, max_slices: int,
          given: int | None = None, pairs: bool = False) -> dict[str, Any]:
    """Every plan scored at the case's budget, and the no-budget recommendation."""
    report = analyze(case["equation"], case["shapes"], objective="time", profile=profile)
    forward, eq = report.plan, report.plan.equation
    grad = tuple(range(eq.num_operands))
    output_bytes = 4 * math.prod(eq.size_dict[c] for c in eq.output)
    f = floor_bytes(eq, grad, 4) + output_bytes
    p = torch_model(forward, grad, 4).memory.peak_bytes
    budget = given if given is not None else int(f + share * (p - f))
    largest = max(math.prod(eq.size_dict[c] for c in t) for t in (*eq.terms, eq.output))
    paths = candidate_paths(eq, grad, forward=forward, cotengra=False,
                            tighter_limits=(largest, 8 * largest),
                            sweep_limits=sweep_limits(forward))
    plans = {path: (source, Plan.from_path(eq, path, optimizer=source))
             for source, path in paths}
    rows: list[dict[str, Any]] = []

    def add(path: Any, strategy: str, options: dict[str, Any] | None) -> None:
        source, plan = plans[path]
        scored = score_path(plan, grad, strategy, itemsize=4, source=source, budget=budget,
                            options=options, profile=profile)
        rows.append({"source": source, "path": [list(s) for s in path], "strategy": strategy,
                     "options": options, "peak_bytes": scored.peak_bytes,
                     "predicted_s": scored.predicted_s, "fits": scored.fits(budget)})

    for path in plans:
        for strategy in UNSLICED:
            add(path, strategy, None)
    def best(path: Any, figure: str) -> float:
        return min(r[figure] for r in rows if r["path"] == [list(s) for s in path])

    sliced_on = list(dict.fromkeys([tuple(tuple(s) for s in forward.path),
                                    *sorted(plans, key=lambda q: best(q, "peak_bytes"))[:2],
                                    min(plans, key=lambda q: best(q, "predicted_s"))]))[:3]
    for path in sliced_on:
        add(path, "sliced", None)  # the finder's own choice at the budget
        for label, size in sorted(eq.size_dict.items()):
            chunk = size
            while chunk > 1 and size // (chunk // 2) <= max_slices:
                chunk //= 2
                for per_slice in ("reverse", "checkpoint"):
                    for fused in (True, False):
                        add(path, "sliced", {"indices": {label: chunk},
                                             "per_slice": per_slice, "fused": fused})
        for first, second in itertools.combinations(sorted(eq.size_dict) if pairs else (), 2):
            for ways in itertools.product(PAIR_WAYS, repeat=2):
                sizes = (eq.size_dict[first], eq.size_dict[second])
                if all(size >= n for size, n in zip(sizes, ways, strict=True)):
                    add(path, "sliced", {"indices": {first: sizes[0] // ways[0],
                                                     second: sizes[1] // ways[1]}})
    rec = report.recommended
    assert rec is not None
    return {"case": case["name"], "floor_bytes": f, "autograd_peak_bytes": p,
            "budget_bytes": budget, "plans": rows,
            "recommended": {"source": rec.plan.source, "strategy": rec.plan.strategy,
                            "path": [list(s) for s in rec.plan.path],
                            "peak_bytes": rec.plan.peak_bytes,
                            "predicted_s": rec.plan.predicted_s, "options": None}}


def measure(case: dict[str, Any], row: dict[str, Any], device: str, repeats: int,
            warmup: int) -> dict[str, Any]:
    """Run one plan (its path, strategy and options) and return its measured figures."""
    options = {row["strategy"]: row["options"]} if row["options"] else None
    if options is None and row["strategy"] in ("checkpoint", "sliced") and row["budget_bytes"]:
        options = {row["strategy"]: {"budget_bytes": row["budget_bytes"]}}  # as scored
    report = analyze(case["equation"], case["shapes"], optimize=row["path"],
                     strategies=[row["strategy"]], strategy_options=options)
    done = execute(report, devices=[device], repeats=repeats, warmup=warmup)
    run = next(r for r in done.runs if r.strategy == row["strategy"] and not r.is_baseline)
    figures = run.to_dict()
    if figures.get("skipped"):
        return {"skipped": figures["skipped"]}
    seconds = figures["forward_s"]["median"] + (figures["backward_s"] or {}).get("median", 0)
    return {"time_s": seconds, "peak_bytes": figures.get("peak_bytes_measured"),
            "predicted_peak_bytes": report.strategies[0].memory.peak_bytes}


def mib(value: float) -> str:
    return f"{value / 2**20:.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default="tucker,tn18-b512", help="comma list of cases")
    parser.add_argument("--share", type=float, default=0.5,
                        help="B = F + SHARE * (P - F) (default 0.5, bench_training's)")
    parser.add_argument("--budget-mib", type=float, default=None,
                        help="this budget instead of the midpoint (e.g. compiled's peak)")
    parser.add_argument("--roofline", default="h200", choices=sorted(NOMINAL),
                        help="the nominal profile the times are predicted on")
    parser.add_argument("--scale", type=int, default=1,
                        help="divide dimensions of 64 or more by this (a quick CPU run)")
    parser.add_argument("--pairs", action="store_true",
                        help="also slice every two labels together, 2, 4 or 8 ways each")
    parser.add_argument("--max-slices", type=int, default=64)
    parser.add_argument("--top", type=int, default=8, help="fitting plans printed")
    parser.add_argument("--device", default="none", help="none (model only), cpu or cuda")
    parser.add_argument("--measure", type=int, default=3,
                        help="fastest fitting plans run on --device")
    parser.add_argument("--also", default="",
                        help="more plans to run, as STRATEGY@SOURCE items separated by ';' "
                             "(e.g. 'reverse@reconfigured(dp, training-flops)')")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args()
    profile = NOMINAL[args.roofline]
    if args.device.startswith("cuda"):
        from einsum_analyze.backends.calibration import device_profile

        profile = device_profile(args.device, "float32")
    chosen = select_cases(json.loads((HERE / "cases.json").read_text())["cases"], args.cases)
    cases = {c["name"]: dict(c, shapes=scaled(c["shapes"], args.scale)) for c in chosen}
    results = []
    for name in cases:
        found = space(cases[name], args.share, profile, args.max_slices,
                      None if args.budget_mib is None else int(args.budget_mib * 2**20),
                      args.pairs)
        rows, rec = found["plans"], found["recommended"]
        fitting = sorted((r for r in rows if r["fits"]), key=lambda r: r["predicted_s"])
        unsliced = [r for r in rows if r["strategy"] != "sliced"]
        print(f"{name}: F {mib(found['floor_bytes'])} MiB, P {mib(found['autograd_peak_bytes'])}"
              f" MiB, B {mib(found['budget_bytes'])} MiB; {len(rows)} plans on "
              f"{len({str(r['path']) for r in rows})} paths, {len(fitting)} fit B; least "
              f"peak not sliced {mib(min(r['peak_bytes'] for r in unsliced))} MiB")
        print(f"  no budget: {rec['strategy']} on {rec['source']}, {mib(rec['peak_bytes'])} "
              f"MiB, predicted {rec['predicted_s'] * 1e3:.3f} ms ({profile.name})")
        for r in fitting[:args.top]:
            print(f"  fits: {r['strategy']} {r['options'] or ''} on {r['source']}, "
                  f"{mib(r['peak_bytes'])} MiB, predicted {r['predicted_s'] * 1e3:.3f} ms "
                  f"({r['predicted_s'] / rec['predicted_s']:.2f}x)")
        if args.device != "none":
            found["measured"] = []
            named: list[dict[str, Any]] = []
            for item in filter(None, (i.strip() for i in args.also.split(";"))):
                named += [r for r in rows if r["options"] is None
                          and f"{r['strategy']}@{r['source']}" == item][:1]
            distinct = list({(r["source"], r["peak_bytes"], r["predicted_s"]): r
                             for r in reversed(fitting)}.values())[::-1]  # the same plan once
            for r in [rec, *distinct[:args.measure], *named]:
                r = dict(r, budget_bytes=None if r is rec else found["budget_bytes"])
                got = measure(cases[name], r, args.device, args.repeats, args.warmup)
                found["measured"].append({**r, **{"measured": got}})
                print(f"  measured {r['strategy']} {r['options'] or ''} on {r['source']}: "
                      + (got.get("skipped") or f"{got['time_s'] * 1e3:.3f} ms, peak "
                         f"{mib(got['peak_bytes'] or 0)} MiB (predicted "
                         f"{mib(got['predicted_peak_bytes'])})"))
        results.append(found)
    if args.json:
        Path(args.json).write_text(json.dumps({"profile": profile.name, "share": args.share,
                                               "cases": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
