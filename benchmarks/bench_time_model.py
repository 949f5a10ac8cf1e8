#!/usr/bin/env python3
"""The time model against measured time, per shared case: predicted / measured fwd+bwd.

For every case of ``benchmarks/cases.json`` (every operand differentiated), ``reverse``
and ``independent`` run through ``einsum_analyze.execute`` beside the ``torch-autograd``
baseline; each run carries the time model's prediction on the device's calibrated profile
(the roofline of each step, the layout copies at the bandwidth, and the calibrated cost
per kernel). Printed per case and run: the measured median forward + backward, the
prediction and their ratio, and each phase measured / predicted (``--steps``: each step's
too, timed apart); then, over the runs measured above ``--above`` seconds (the
issue's 0.2 ms), how many fall in [0.75, 1.33] (the target on the H200), and the
environment and the calibration.

On CPU (no CUDA) large dimensions are divided by ``--scale``, torch runs one thread
(``--threads``) and, with one thread, runs and calibration are timed by the process's CPU
time (``--clock cpu``, the default there): on a shared machine it leaves out the time
other processes hold the core. On CUDA the clock is the wall clock.

Usage::

    python benchmarks/bench_time_model.py --device cuda --json time_model_h200.json
    python benchmarks/bench_time_model.py --device cpu --scale 8 --repeats 10
"""

# ruff: noqa: T201

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
import _common  # noqa: E402
from _common import scaled  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from einsum_analyze import analyze, execute  # noqa: E402

LOW, HIGH = 0.75, 1.33
"""The issue's band for predicted / measured forward + backward."""

STRATEGIES = ("reverse", "independent", "torch-autograd")


def run_case(case: dict[str, Any], device: str, scale: int, dtype: str, repeats: int,
             warmup: int, steps: bool = False) -> list[dict[str, Any]]:
    """One row per run of the case that ran and has a prediction.

    With ``steps``, the runs also time each step (``--profile-steps``), and each row
    carries every step's measured and predicted seconds.
    """
    shapes = case["shapes"] if device.startswith("cuda") else scaled(case["shapes"], scale)
    report = analyze(case["equation"], [tuple(s) for s in shapes], dtype=dtype,
                     strategies=STRATEGIES)
    report = execute(report, devices=[device], repeats=repeats, warmup=warmup, force=True,
                     profile_steps=steps)
    rows = []
    for run in report.runs:
        if run.skipped is not None or run.forward is None or run.predicted is None:
            continue
        backward = run.backward.median_s if run.backward else 0.0
        measured = run.forward.median_s + backward
        rows.append({"case": case["name"], "shapes": shapes, "strategy": run.strategy,
                     "measured_s": measured, "predicted_s": run.predicted.total_s,
                     "forward_s": run.forward.median_s, "backward_s": backward,
                     "predicted_forward_s": run.predicted.forward_s,
                     "predicted_backward_s": run.predicted.backward_s,
                     "ratio": run.predicted.total_s / measured if measured > 0 else None,
                     "launches": run.predicted.launches,
                     "steps": _steps(report, run),
                     "calibration": report.environment.get("calibration")})
    return rows


def _steps(report: Any, run: Any) -> list[dict[str, Any]]:
    """Each timed step of ``run``: phase, kernel, launches, measured and predicted."""
    roofline = report.roofline.strategy(run.strategy) if report.roofline else None
    costs = {step.event: step for step in roofline.steps} if roofline else {}
    out = []
    for step in run.steps:
        cost = costs.get(step.event)
        out.append({"phase": step.phase, "tensor": step.tensor, "time_s": step.time_s,
                    "predicted_s": step.predicted_s,
                    "kernel": cost.kernel if cost else None,
                    "launches": cost.launches if cost else None})
    if run.steps:
        out.append({"phase": "other", "tensor": "", "time_s": run.other_s or 0.0,
                    "predicted_s": None, "kernel": None, "launches": None})
    return out


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.3f}"


def print_steps(row: dict[str, Any]) -> None:
    """The row's steps, one line each (``--steps``)."""
    for step in row["steps"]:
        print(f"    {step['phase']:8} {step['kernel'] or '':10} x{step['launches'] or '-':<3} "
              f"measured {_ms(step['time_s']):>8} ms  predicted {_ms(step['predicted_s']):>8} ms")


def use_clock(device: str, args: argparse.Namespace) -> None:
    """Set torch's threads and the runs' clock from ``--threads`` and ``--clock``."""
    import torch

    from einsum_analyze.backends import timing

    on_cpu = not device.startswith("cuda")
    if args.threads is not None or on_cpu:
        torch.set_num_threads(args.threads or 1)
    clock = args.clock or ("cpu" if on_cpu and torch.get_num_threads() == 1 else "wall")
    if clock == "cpu" and not (on_cpu and torch.get_num_threads() == 1):
        raise SystemExit("--clock cpu needs --device cpu and one thread (the calibration "
                         "uses it only there)")
    # execute() times its runs with prepare()'s default clock: the benchmark sets it.
    for timed in (timing.prepare, timing.measure):
        timed.__kwdefaults__["clock"] = _common.CLOCKS[clock]
    args.clock = clock


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    _common.add_case_options(parser)
    parser.add_argument("--above", type=float, default=2e-4,
                        help="count runs measured above this many seconds (0.2 ms)")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch threads (default: 1 on cpu, torch's own on cuda)")
    parser.add_argument("--clock", choices=tuple(_common.CLOCKS), default=None,
                        help="cpu (the process's CPU time; default on cpu with one thread) "
                        "or wall")
    parser.add_argument("--steps", action="store_true",
                        help="also time each step (--profile-steps) and print its measured "
                        "and predicted seconds under its run")
    args = parser.parse_args()
    device, cases = _common.read_cases(args)
    use_clock(device, args)
    rows: list[dict[str, Any]] = []
    limit = _common.TimeLimit(args.max_seconds)
    print(f"{'case':20} {'strategy':15} {'measured':>9} {'predicted':>9} {'pred/meas':>9}"
          f"   {'forward ms':>15} {'backward ms':>15}")
    for case in limit.cases(cases):
        for row in run_case(case, device, args.scale, args.dtype, args.repeats, args.warmup,
                            args.steps):
            rows.append(row)
            inside = LOW <= (row["ratio"] or 0) <= HIGH
            mark = "" if row["measured_s"] <= args.above else ("ok" if inside else "MISS")
            phases = (f"{_ms(row['forward_s']):>7}/{_ms(row['predicted_forward_s']):<7} "
                      f"{_ms(row['backward_s']):>7}/{_ms(row['predicted_backward_s']):<7}")
            print(f"{row['case']:20} {row['strategy']:15} {row['measured_s'] * 1e3:7.3f}ms "
                  f"{row['predicted_s'] * 1e3:7.3f}ms {row['ratio']:9.2f} {mark:4} {phases}")
            if args.steps:
                print_steps(row)
    counted = [r for r in rows if r["measured_s"] > args.above and r["ratio"] is not None]
    inside = [r for r in counted if LOW <= r["ratio"] <= HIGH]
    if counted:
        ratios = [r["ratio"] for r in counted]
        print(f"\nruns above {args.above * 1e3:g} ms: {len(inside)} of {len(counted)} within "
              f"[{LOW}, {HIGH}]; predicted/measured median {statistics.median(ratios):.2f}, "
              f"range {min(ratios):.2f} to {max(ratios):.2f}")
    limit.report()
    _common.finish(device, rows, args.json, dtype=args.dtype, above_s=args.above,
                   left_out=limit.left_out, clock=args.clock)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
