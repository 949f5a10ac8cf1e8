"""Slicing overhead: the sliced plan against checkpointing at half the unsliced peak.

For each case (default: ``tn18-b65536-bond64``, the issue's target, then ``mps-layer`` and
``tn18-b512``), on the forward path opt_einsum's ``auto`` plans:

- U: reverse mode's training peak (inputs included) and training FLOPs, unsliced;
- budget = U / 2 (the target's budget);
- ``sliced``: the finder's plan within the budget (fused: each slice forward then
  backward), its indices, slices, FLOPs over U's (target: at most 1.15x), its peak with
  the full-size buffers and one slice's own peak; ``sliced (unfused)``: autograd's order
  (the forward makes the output first), one more forward;
- ``checkpoint``: the keep-set within the budget, or its least peak;
- ``recommended``: ``analyze(..., budget=U/2, strategies=[reverse, checkpoint, sliced])``
  (objective flops), which also searches other paths; and the choice on the forward
  path alone (the plan of fewest FLOPs that fits).

With ``--device cpu|cuda`` the plans also run (``einsum_analyze.execute``): measured peak
(CUDA ``max_memory_allocated``, CPU torch.profiler) beside the prediction, forward plus
backward time, and the gradient error against the float64 oracle. On CPU large
dimensions are divided by ``--scale`` (default 8).

Usage::

    python benchmarks/bench_slicing.py                      # analysis only, full sizes
    python benchmarks/bench_slicing.py --device cuda --json slicing.json
    python benchmarks/bench_slicing.py --device cpu --cases tn18-b512
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import _common  # noqa: E402

from einsum_analyze import analyze, execute  # noqa: E402
from einsum_analyze.render.formatting import format_bytes  # noqa: E402
from einsum_analyze.strategies import StrategyResult  # noqa: E402

DEFAULT_CASES = ("tn18-b65536-bond64", "mps-layer", "tn18-b512")
TARGET = 1.15


def _flops(result: StrategyResult) -> int:
    return result.forward_flops + result.backward_flops


def run_case(case: dict[str, Any], shapes: list[list[int]], device: str | None,
             repeats: int) -> dict[str, Any]:
    """Analyse one case at half its unsliced peak (and run it where asked)."""
    equation = case["equation"]
    start = time.perf_counter()
    (unsliced,) = analyze(equation, shapes, strategies=["reverse"]).strategies
    budget = unsliced.memory.peak_bytes // 2
    base_flops = _flops(unsliced)
    report = analyze(equation, shapes, strategies=["reverse", "checkpoint", "sliced"],
                     budget=budget)
    unfused = analyze(equation, shapes, strategies=["sliced"], strategy_options={
        "sliced": {"budget_bytes": budget, "fused": False}}).strategies[0]
    analysis_s = time.perf_counter() - start
    rows: dict[str, dict[str, Any]] = {}
    for result in (*report.strategies, unfused):
        label = result.name if result is not unfused else "sliced (unfused)"
        section = result.details.get("slicing") or {}
        rows[label] = {
            "flops": _flops(result),
            "flops_ratio": _flops(result) / base_flops,
            "peak_bytes": result.memory.peak_bytes,
            "fits": result.memory.peak_bytes <= budget,
            "slices": section.get("count"),
            "indices": ",".join(f"{c}:{n}" for c, n in zip(section.get("indices", []),
                                                          section.get("chunks", []),
                                                          strict=True)) or None,
            "per_slice_peak_bytes": section.get("per_slice_peak_bytes"),
            "copies": section.get("copies"),
        }
    fitting = [name for name in ("reverse", "checkpoint", "sliced") if rows[name]["fits"]]
    on_path = min(fitting, key=lambda n: (rows[n]["flops"], rows[n]["peak_bytes"]),
                  default=None)
    rec = report.recommended
    assert rec is not None
    found: dict[str, Any] = {
        "case": case["name"], "shapes": shapes, "budget_bytes": budget,
        "unsliced_peak_bytes": unsliced.memory.peak_bytes, "unsliced_flops": base_flops,
        "analysis_s": analysis_s, "plans": rows, "forward_path_choice": on_path,
        "recommended": {
            "strategy": rec.plan.strategy, "source": rec.plan.source, "fits": rec.fits,
            "path": [list(p) for p in rec.plan.path],
            "flops_ratio": rec.plan.training_flops / base_flops,
            "peak_bytes": rec.plan.peak_bytes,
        },
        "target_met": rows["sliced"]["fits"] and rows["sliced"]["flops_ratio"] <= TARGET,
    }
    if device is not None:
        ran = execute(report, devices=[device], repeats=repeats, warmup=1)
        found["runs"] = [
            {"strategy": r.strategy, "peak_bytes_measured": r.peak_bytes_measured,
             "peak_bytes_predicted": r.peak_bytes_predicted,
             "time_s": (r.forward.median_s + (r.backward.median_s if r.backward else 0.0))
             if r.forward else None,
             "max_grad_error": r.max_grad_error, "skipped": r.skipped}
            for r in ran.runs
        ]
    return found


def print_case(found: dict[str, Any]) -> None:
    print(f"\n{found['case']}: unsliced reverse {format_bytes(found['unsliced_peak_bytes'])}, "
          f"{found['unsliced_flops']:.3e} FLOPs; budget {format_bytes(found['budget_bytes'])}"
          f" (analysis {found['analysis_s']:.2f} s)")
    print(f"  {'plan':18s} {'FLOPs ratio':>11s} {'peak':>11s} {'fits':>5s} {'slices':>7s} "
          f"{'indices':>14s} {'one slice':>10s} {'copies':>7s}")
    for name, row in found["plans"].items():
        one = row["per_slice_peak_bytes"]
        print(f"  {name:18s} {row['flops_ratio']:10.3f}x {format_bytes(row['peak_bytes']):>11s}"
              f" {'yes' if row['fits'] else 'no':>5s} {row['slices'] or '-':>7} "
              f"{row['indices'] or '-':>14s} {format_bytes(one) if one else '-':>10s} "
              f"{row['copies'] if row['copies'] is not None else '-':>7}")
    rec = found["recommended"]
    print(f"  recommended: {rec['strategy']} on the {rec['source']} path, "
          f"{rec['flops_ratio']:.3f}x the unsliced FLOPs, {format_bytes(rec['peak_bytes'])}"
          f"{'' if rec['fits'] else ' (does not fit)'}; on the forward path alone: "
          f"{found['forward_path_choice'] or 'nothing fits'}")
    sliced = found["plans"]["sliced"]
    print(f"  target (sliced fits, at most {TARGET}x the unsliced FLOPs): "
          f"{'met' if found['target_met'] else 'NOT met'} ({sliced['flops_ratio']:.3f}x)")
    for run in found.get("runs", []):
        if run["skipped"]:
            print(f"    run {run['strategy']:18s} skipped: {run['skipped']}")
            continue
        measured, predicted = run["peak_bytes_measured"], run["peak_bytes_predicted"]
        print(f"    run {run['strategy']:18s} {run['time_s'] * 1e3:9.3f} ms  peak "
              f"{measured} B" + (f" (predicted {predicted} B, "
                                 f"{'equal' if measured == predicted else 'DIFFERENT'})"
                                 if predicted is not None else "")
              + (f"  grad error {run['max_grad_error']:.1e}"
                 if run["max_grad_error"] is not None else ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default=",".join(DEFAULT_CASES))
    parser.add_argument("--device", default=None, help="cpu or cuda: also run the plans")
    parser.add_argument("--scale", type=int, default=None,
                        help="divide dimensions of 64 or more (default: 8 on cpu, else 1)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", default=None, help="write the figures here")
    _common.add_time_limit(parser)
    args = parser.parse_args()
    device = args.device
    scale = args.scale or (8 if device == "cpu" else 1)
    cases = {c["name"]: c for c in json.loads((HERE / "cases.json").read_text())["cases"]}
    names = _common.wanted_names(args.cases, cases)
    env = _common.environment(device or "none")
    env["scale"] = scale
    print("environment: " + ", ".join(f"{k}={v}" for k, v in env.items()))
    results = []
    limit = _common.TimeLimit(args.max_seconds)
    for name in limit.cases(names, name=str):
        case = cases[name]
        shapes = _common.scaled(case["shapes"], scale) if scale > 1 else case["shapes"]
        found = run_case(case, shapes, device, args.repeats)
        print_case(found)
        results.append(found)
    limit.report()
    if args.json:
        Path(args.json).write_text(json.dumps({"environment": env, "cases": results,
                                               "left_out": limit.left_out},
                                              indent=1))


if __name__ == "__main__":
    main()
