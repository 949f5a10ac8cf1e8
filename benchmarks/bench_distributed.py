#!/usr/bin/env python3
"""A sliced training step on N devices against one device running the same slices.

The case (default ``tn18-b65536-bond64`` of ``benchmarks/cases.json``, float32, every
operand differentiated) is analysed with the ``sliced`` strategy under a budget: a
fraction of the unsliced (``reverse``) training peak, halved until the plan has at least
``--min-slices`` slices (or ``--budget`` as given). Its slices then run in one process
per device (:func:`einsum_analyze.distributed.run_distributed`: NCCL on GPUs, gloo on
cpu), assigned by cost; in the same run the first device also runs every slice alone,
the baseline of the speedup. Each way of communicating (``--communication``: every
buffer all-reduced, the first design and the baseline; parts gathered from their owners;
the same overlapped with the next slice) is timed in the same processes, their steps
interleaved, so that before and after meet the same machine. Printed per way: each
device's compute, wait and communication medians, its measured peak (CUDA
``max_memory_allocated``, cpu torch.profiler) against the predicted one; then one line
per way with its collective calls, the bytes a device receives, the slowest device's
communication as a ratio to the baseline's, step, speedup, efficiency and gradient error;
then the model's step against the measured one (its error) and its projection for 4 and
8 devices (``benchmarks/project_distributed.py``, docs/distributed.md), and the
environment.

Usage::

    python benchmarks/bench_distributed.py --devices cuda:0,cuda:1 --json dist.json
    python benchmarks/bench_distributed.py --devices cpu*2 --scale 64 --repeats 3
"""

# ruff: noqa: T201

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from _common import environment, refuse_unknown, scaled  # noqa: E402
from project_distributed import check_lines  # noqa: E402

from einsum_analyze import analyze  # noqa: E402
from einsum_analyze.distributed import (  # noqa: E402
    DistributedJob,
    parse_devices,
    run_distributed,
)
from einsum_analyze.distributed.comm import COMMUNICATIONS, OUTPUT  # noqa: E402
from einsum_analyze.distributed.from_report import runner_for  # noqa: E402
from einsum_analyze.render.formatting import format_bytes, format_seconds  # noqa: E402


def _case(name: str) -> tuple[str, list[list[int]]]:
    cases = {case["name"]: case for case in
             json.loads((HERE / "cases.json").read_text(encoding="utf-8"))["cases"]}
    if name not in cases:
        refuse_unknown("--case", [name], cases)
    return cases[name]["equation"], cases[name]["shapes"]


def sliced_report(equation: str, shapes: list[list[int]], *, budget: int | None,
                  fraction: float, min_slices: int, dtype: str,
                  indices: str | None) -> tuple[Any, int, int]:
    """The analysis whose sliced plan has at least ``min_slices`` slices.

    The sliced strategy alone, with its own ``budget_bytes`` (no training-aware search):
    ``budget``, else ``fraction`` of the unsliced peak halved until the plan has
    ``min_slices`` slices; or the slices given by ``indices`` (``b:8192``).

    Returns:
        The report, its budget, and the unsliced (reverse) training peak.
    """
    unsliced = analyze(equation, shapes, dtype=dtype, strategies=("reverse",))
    peak = unsliced.strategies[0].memory.peak_bytes
    chosen = budget if budget is not None else int(peak * fraction)
    while True:
        options: dict[str, Any] = {"budget_bytes": chosen}
        if indices:
            options["indices"] = indices
        report = analyze(equation, shapes, dtype=dtype, strategies=("sliced",),
                         strategy_options={"sliced": options})
        count = runner_for(report).slice_count
        if count >= min_slices or budget is not None or indices or chosen < 1024:
            return report, chosen, peak
        chosen //= 2


def _row(label: str, d: Any) -> str:
    equal = d.peak_bytes_measured == d.peak_bytes_predicted
    wait = "-" if d.wait_s is None else format_seconds(d.wait_s)
    return (f"{label:<12}{len(d.slices):>7}{format_seconds(d.compute_s or 0):>11}"
            f"{wait:>10}{format_seconds(d.communication_s or 0):>10}"
            f"{d.peak_bytes_measured or 0:>12}{d.peak_bytes_predicted or 0:>12}  {equal}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", default=None,
                        help="cuda:0,cuda:1, all, cpu*2 (default: all GPUs, else cpu*2)")
    parser.add_argument("--case", default="tn18-b65536-bond64")
    parser.add_argument("--equation", help="instead of --case, with --shapes (JSON)")
    parser.add_argument("--shapes", help="JSON list of shapes, with --equation")
    parser.add_argument("--budget", type=int, help="bytes; default: a fraction of the peak")
    parser.add_argument("--fraction", type=float, default=0.5,
                        help="first budget as a fraction of the unsliced training peak")
    parser.add_argument("--min-slices", type=int, default=8)
    parser.add_argument("--indices", help="the slices instead of a budget: b:8192, ...")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--scale", type=int, default=1,
                        help="divide dimensions of 64 or more by this (cpu runs)")
    parser.add_argument("--communication", default=",".join(COMMUNICATIONS),
                        help="the ways the buffers cross, run one after the other in this "
                             f"run, the first the baseline (default {','.join(COMMUNICATIONS)})")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=540.0)
    parser.add_argument("--json", dest="json_path")
    args = parser.parse_args()
    if not args.equation:
        equation, shapes = _case(args.case)
    else:
        equation, shapes = args.equation, json.loads(args.shapes)

    import torch

    text = args.devices or ("all" if torch.cuda.is_available() else "cpu*2")
    devices = parse_devices(text)
    modes = [m.strip() for m in args.communication.split(",") if m.strip()]
    unknown = [m for m in modes if m not in COMMUNICATIONS]
    if unknown or not modes:
        print(f"--communication {unknown[0] if unknown else ''!r}: one of "
              f"{', '.join(COMMUNICATIONS)}", file=sys.stderr)
        return 2
    shapes = scaled(shapes, args.scale) if args.scale > 1 else shapes
    report, budget, unsliced_peak = sliced_report(
        equation, shapes, budget=args.budget, fraction=args.fraction,
        min_slices=args.min_slices, dtype=args.dtype, indices=args.indices)
    runner = runner_for(report)
    eq = report.equation
    job = DistributedJob(
        runner=runner, text=eq.text, explicit=eq.explicit,
        shapes=tuple(tuple(s) for s in eq.shapes),
        output_shape=tuple(eq.size_dict[c] for c in eq.output), dtype=args.dtype,
        grad=tuple(report.grad_operands), repeats=args.repeats, warmup=args.warmup,
        timeout_s=args.timeout, communication=modes[0], compare=tuple(modes[1:]),
        calibrate=True)
    primary = run_distributed(job, devices)
    results = {modes[0]: primary, **{c.communication: c for c in primary.compared}}
    env = environment(devices.devices[0])
    env["devices"] = list(devices.devices)
    if devices.is_cuda:
        env["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        env["nccl"] = ".".join(str(v) for v in torch.cuda.nccl.version())

    print(f"case: {args.equation or args.case}  shapes scaled 1/{args.scale}  {args.dtype}")
    slicing = next(s for s in report.strategies if s.name == "sliced").details["slicing"]
    print(f"budget {format_bytes(budget)} ({budget / unsliced_peak:.3f} of the unsliced "
          f"training peak {format_bytes(unsliced_peak)}): {runner.slice_count} slices of "
          f"{dict(zip(slicing['indices'], slicing['chunks'], strict=True))}, fits "
          f"{slicing['fits_budget']}, FLOPs {slicing['overhead_ratio']:.3f}x unsliced, "
          f"modelled peak {format_bytes(slicing['peak_bytes_with_accumulators'])}")
    failed = list(primary.errors)
    if failed:
        for line in failed:
            print(f"FAILED {line}")
        return 2
    first = results[modes[0]]
    single = first.single_device or {}
    if len(results) != len(modes):
        print("FAILED a way of communicating has no figures")
        return 2
    for mode, result in results.items():
        print(f"\n{mode}: {result.calls} collective calls per step, at most "
              f"{format_bytes(result.moved_bytes or 0)} received per device")
        print(f"{'device':<12}{'slices':>7}{'compute':>11}{'wait':>10}{'comm':>10}"
              f"{'peak meas':>12}{'peak pred':>12}  equal")
        for d in result.per_device:
            print(_row(d.device, d))
    print(f"{single['device'] + ' alone':<12}{single['slices']:>7}"
          f"{format_seconds(single['seconds']):>11}{'-':>10}{'-':>10}"
          f"{single['peak_bytes_measured']:>12}{single['peak_bytes_predicted']:>12}  "
          f"{single['peak_bytes_measured'] == single['peak_bytes_predicted']}")
    n = len(devices.devices)
    print(f"\n{'communication':<14}{'calls':>6}{'received':>11}{'comm':>10}{'ratio':>7}"
          f"{'after':>10}{'step':>10}{'speedup':>9}{'efficiency':>11}{'grad err':>10}")
    def after(result: Any) -> float:
        return max((d.communication_s or 0.0) + (d.wait_s or 0.0) for d in result.per_device)

    def comm_of(result: Any) -> float:
        return max(d.communication_s or 0.0 for d in result.per_device)

    base_comm = comm_of(first)
    for mode, result in results.items():
        comm = comm_of(result)
        speedup = float(single["seconds"]) / (result.step_s or float("inf"))
        print(f"{mode:<14}{result.calls or 0:>6}{format_bytes(result.moved_bytes or 0):>11}"
              f"{format_seconds(comm):>10}{comm / base_comm if base_comm else 0:>7.2f}"
              f"{format_seconds(after(result)):>10}"
              f"{format_seconds(result.step_s or 0):>10}{speedup:>8.3f}x"
              f"{speedup / n:>11.3f}{result.max_grad_error or 0:>10.1e}")
    print("comm: the slowest device's collectives median (under overlap what is left "
          "after its slices, waiting for a peer included); ratio: to the first way's; "
          "after: wait and comm, what the step spends once a device's slices are done")
    costs = list(runner.slice_costs())
    geometry = {"buffers": {str(OUTPUT): eq.output,
                            **{str(i): eq.terms[i] for i in runner.grad}},
                "size_dict": dict(eq.size_dict)}
    sections = {mode: {**r.to_dict(), "single_device": single, "compared": [],
                       "collectives": primary.collectives} for mode, r in results.items()}
    data = {"case": args.equation or args.case, "scale": args.scale, "dtype": args.dtype,
            "itemsize": report.itemsize, "budget_bytes": budget,
            "unsliced_peak_bytes": unsliced_peak, "slicing": slicing, **geometry,
            "runs": sections, "slice_costs": costs,
            "timings": {m: r.timings for m, r in results.items()}, "environment": env}
    print()
    for line in check_lines(data, (4, 8)):
        print(line)
    print("environment:", json.dumps(env))
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
