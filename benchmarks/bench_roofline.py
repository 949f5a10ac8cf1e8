#!/usr/bin/env python3
"""The reverse strategy against the calibrated roofline, per shared case.

For every case of ``benchmarks/cases.json`` (every operand differentiated), the reverse
strategy runs through ``einsum_analyze.execute`` (our executor, with ``--profile-steps``)
and the report's roofline, on the device's calibrated profile (a large copy and a large
``bmm`` in the dtype, measured in the same process), bounds it. Printed per case: the
measured median forward + backward, the bound, their ratio, and the costliest step with
its efficiency; then the environment and the calibration. The issue's target (H200,
float32 without TF32): ratio at most 2.5 on ``tn18-b65536-bond64``, ``tucker`` and
``attention3``.

On CPU (no CUDA) large dimensions are divided by ``--scale``.

Usage::

    python benchmarks/bench_roofline.py --device cuda --json roofline_h200.json
    python benchmarks/bench_roofline.py --device cpu --scale 8 --cases chain3,tucker
"""

# ruff: noqa: T201

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
import _common  # noqa: E402
from _common import scaled  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from einsum_analyze import analyze, execute  # noqa: E402

TARGETS = {"tn18-b65536-bond64": 2.5, "tucker": 2.5, "attention3": 2.5}
"""The issue's ceilings on measured / bound (H200)."""


def run_case(case: dict[str, Any], device: str, scale: int, dtype: str, repeats: int,
             warmup: int) -> dict[str, Any]:
    shapes = case["shapes"] if device.startswith("cuda") else scaled(case["shapes"], scale)
    report = analyze(case["equation"], [tuple(s) for s in shapes], dtype=dtype,
                     strategies=("reverse",))
    report = execute(report, devices=[device], repeats=repeats, warmup=warmup,
                     profile_steps=True, force=True)
    entry: dict[str, Any] = {"name": case["name"], "shapes": shapes}
    run = next(r for r in report.runs if r.strategy == "reverse" and not r.is_baseline)
    torch_run = next((r for r in report.runs if r.strategy == "torch-autograd"), None)
    assert report.roofline is not None
    bound = report.roofline.strategies[0]
    entry["bound_s"] = bound.bound_s()
    entry["forward_bound_s"] = bound.bound_s("forward")
    entry["copy_bytes"] = sum(s.copy_bytes for s in bound.steps)
    if run.skipped is not None or run.forward is None:
        entry["skipped"] = run.skipped
        return entry
    measured = run.forward.median_s + (run.backward.median_s if run.backward else 0.0)
    entry.update({"forward_s": run.forward.median_s, "measured_s": measured,
                  "ratio": measured / entry["bound_s"] if entry["bound_s"] else None,
                  "target": TARGETS.get(case["name"])})
    if torch_run is not None and torch_run.forward is not None:
        entry["torch_autograd_s"] = torch_run.forward.median_s + (
            torch_run.backward.median_s if torch_run.backward else 0.0)
    if run.steps:
        worst = max(run.steps, key=lambda step: step.time_s)
        total = sum(step.time_s for step in run.steps) + (run.other_s or 0.0)
        entry["steps_total_s"] = total
        entry["costliest_step"] = {
            "event": worst.event, "tensor": worst.tensor,
            "equation": report.strategies[0].events[worst.event].equation,
            "time_s": worst.time_s, "share": worst.time_s / total if total else None,
            "efficiency": worst.bound_s / worst.time_s if worst.bound_s else None}
    entry["calibration"] = report.environment.get("calibration")
    return entry


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    _common.add_case_options(parser)
    args = parser.parse_args()
    device, cases = _common.read_cases(args)
    results = []
    limit = _common.TimeLimit(args.max_seconds)
    print(f"{'case':20} {'measured':>10} {'bound':>10} {'ratio':>6} {'target':>6}  "
          "costliest step (share, efficiency)")
    for case in limit.cases(cases):
        entry = run_case(case, device, args.scale, args.dtype, args.repeats, args.warmup)
        results.append(entry)
        if "measured_s" not in entry:
            print(f"{entry['name']:20} skipped: {entry.get('skipped')}")
            continue
        worst = entry.get("costliest_step") or {}
        target = entry["target"]
        verdict = ("" if target is None
                   else "ok" if entry["ratio"] is not None and entry["ratio"] <= target
                   else "MISS")
        print(f"{entry['name']:20} {entry['measured_s'] * 1e3:8.3f}ms "
              f"{entry['bound_s'] * 1e3:8.3f}ms {entry['ratio']:6.2f} "
              f"{'' if target is None else f'{target:.1f}':>6} {verdict:4} "
              f"{worst.get('tensor', '')} = {worst.get('equation', '')} "
              f"({(worst.get('share') or 0):.0%}, {(worst.get('efficiency') or 0):.0%})")
    limit.report()
    _common.finish(device, results, args.json, dtype=args.dtype, left_out=limit.left_out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
