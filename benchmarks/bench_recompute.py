#!/usr/bin/env python3
"""Recomputing cheap intermediates: peak and time of each strategy beside eager torch.einsum.

For each case of ``benchmarks/cases.json`` (every operand differentiated), in one run:
``reverse``, ``checkpoint`` (least peak), ``recompute`` and the search's recommended plan
with no budget (``objective=time``, no search deadline unless ``--max-search-time``), run
by ``einsum_analyze.execute``
beside eager torch.einsum + ``torch.autograd.grad`` (``torch-autograd``). For each: the
predicted training peak, the measured one (the device's allocator: on the CPU torch.profiler's
memory events; inputs included), the measured peak and median forward+backward time as
ratios to eager torch's, and the time model's prediction. Compiled torch.einsum is not
run here (docs/results/ has its H200 figures).

Usage::

    python benchmarks/bench_recompute.py --device cpu --cases mps-layer --scale 1
    python benchmarks/bench_recompute.py --device cpu --scale 8 --json out.json
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from einsum_analyze import analyze, execute  # noqa: E402

STRATEGIES = ("reverse", "checkpoint", "recompute", "torch-autograd")
MIB = 2**20


def _time_s(run: Any) -> float | None:
    if run.forward is None or run.backward is None:
        return None
    return run.forward.median_s + run.backward.median_s


def measure_case(case: dict[str, Any], args: argparse.Namespace, device: str
                 ) -> list[dict[str, Any]]:
    """One row per run of the case: figures and ratios to eager torch.einsum's."""
    shapes = scaled(case["shapes"], args.scale)
    report = analyze(case["equation"], shapes, dtype=args.dtype, strategies=STRATEGIES,
                     objective="time", max_search_s=args.max_search_time)
    ran = execute(report, devices=[device], repeats=args.repeats, warmup=args.warmup)
    runs = [r for r in ran.runs if r.strategy != "opt_einsum-torch"]
    eager = next(r for r in runs if r.strategy == "torch-autograd")
    eager_s = _time_s(eager)
    assert report.recommended is not None
    chosen = report.recommended
    # The recommended plan runs under its label, or under its strategy's name when it is
    # one of the report's own (the report's path).
    own = tuple(tuple(s) for s in report.plan.path) == chosen.plan.path
    rows = []
    for run in runs:
        seconds = _time_s(run)
        name = run.strategy
        if name == chosen.label or (own and name == chosen.plan.strategy):
            name = f"{name} (recommended)" if name != chosen.label else (
                f"recommended ({chosen.plan.strategy})")
        rows.append({
            "case": case["name"], "shapes": shapes, "strategy": name,
            "peak_predicted": run.peak_bytes_predicted,
            "peak_measured": run.peak_bytes_measured,
            "peak_vs_eager": (run.peak_bytes_measured / eager.peak_bytes_measured
                              if run.peak_bytes_measured and eager.peak_bytes_measured
                              else None),
            "time_s": seconds,
            "time_vs_eager": seconds / eager_s if seconds and eager_s else None,
            "model_s": run.predicted.total_s if run.predicted is not None else None,
            "grad_error": run.max_grad_error, "skipped": run.skipped,
        })
    return rows


def _cell(value: float | None, form: str) -> str:
    return "-" if value is None else format(value, form)


def print_table(rows: list[dict[str, Any]]) -> None:
    print(f"{'case':<14} {'strategy':<26} {'pred MiB':>9} {'meas MiB':>9} {'peak/eager':>10} "
          f"{'fwd+bwd ms':>10} {'time/eager':>10} {'model ms':>9}")
    for row in rows:
        pred = row["peak_predicted"] / MIB if row["peak_predicted"] else None
        meas = row["peak_measured"] / MIB if row["peak_measured"] else None
        ms = row["time_s"] * 1e3 if row["time_s"] else None
        model = row["model_s"] * 1e3 if row["model_s"] else None
        print(f"{row['case']:<14} {row['strategy']:<26} {_cell(pred, '9.2f')} "
              f"{_cell(meas, '9.2f')} {_cell(row['peak_vs_eager'], '10.3f')} "
              f"{_cell(ms, '10.2f')} {_cell(row['time_vs_eager'], '10.3f')} "
              f"{_cell(model, '9.2f')}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    _common.add_case_options(parser)
    parser.add_argument("--max-search-time", type=_common.positive_seconds, default=None,
                        help="the search's deadline (default: none, so that the plans do "
                             "not depend on the machine's load)")
    args = parser.parse_args()
    device, cases = _common.read_cases(args)
    rows: list[dict[str, Any]] = []
    limit = _common.TimeLimit(args.max_seconds)
    for case in limit.cases(cases):
        rows.extend(measure_case(case, args, device))
        print(f"# {case['name']} done", file=sys.stderr, flush=True)
    print_table(rows)
    limit.report()
    _common.finish(device, rows, args.json, scale=args.scale, left_out=limit.left_out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
