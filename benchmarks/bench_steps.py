"""Per-step times of our executor's reverse schedule on one case (a proxy for profiling).

    python benchmarks/bench_steps.py tn18-b65536-bond64 --device cpu --scale 8
    python benchmarks/bench_steps.py tn18-b65536-bond64 --device cuda --scale 1

Prints each event's median time (fenced: CUDA synchronize after each event), the copy
elements its lowering makes, and the forward/backward totals unfenced.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from einsum_analyze import analyze
from einsum_analyze.backends.torch_backend import compile_schedule, run_compiled

sys.path.insert(0, str(Path(__file__).parent))
from _common import scaled  # noqa: E402

HERE = Path(__file__).parent


def no_lookahead() -> None:
    """Strategies lowered as before the lookahead: each contraction's own cheapest kernel."""
    import functools

    import einsum_analyze.strategies.registry as registry
    from einsum_analyze.model.lowering import lower_events

    registry.lower_events = functools.partial(lower_events, lookahead=False)


def main() -> int:
    import torch

    parser = argparse.ArgumentParser()
    parser.add_argument("case")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--scale", type=int, default=None)
    parser.add_argument("--strategy", default="reverse")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--no-lookahead", action="store_true",
                        help="lower without the layout lookahead (the tree before it)")
    args = parser.parse_args()
    if args.no_lookahead:
        no_lookahead()
    scale = args.scale if args.scale is not None else (1 if args.device.startswith("cuda") else 8)
    cases = {c["name"]: c for c in json.loads((HERE / "cases.json").read_text())["cases"]}
    case = cases[args.case]
    shapes = scaled(case["shapes"], scale)
    report = analyze(case["equation"], shapes, dtype="float32", strategies=[args.strategy])
    (strategy,) = [s for s in report.strategies if s.name == args.strategy]
    events = strategy.events
    sizes = dict(report.equation.size_dict)
    compiled = compile_schedule(events, sizes)
    device = torch.device(args.device)
    gen = torch.Generator().manual_seed(0)
    operands = [torch.randn(s, generator=gen).to(device) for s in shapes]
    out_shape = [sizes[c] for c in report.equation.output]
    upstream = torch.randn(out_shape, generator=gen).to(device)
    fence = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    ops = list(compiled.forward + compiled.backward)
    names = [_describe(e) for e in events]
    per: list[list[float]] = [[] for _ in ops]
    totals: list[tuple[float, float]] = []
    for _ in range(args.repeats + 1):
        live = {f"in{k}": t for k, t in enumerate(operands)}
        fence()
        t0 = time.perf_counter()
        run_compiled(compiled.forward, live)
        fence()
        t1 = time.perf_counter()
        live["upstream"] = upstream.clone()
        fence()
        t2 = time.perf_counter()
        run_compiled(compiled.backward, live)
        fence()
        t3 = time.perf_counter()
        totals.append((t1 - t0, t3 - t2))
        live = {f"in{k}": t for k, t in enumerate(operands)}
        for index, op in enumerate(ops):
            if index == len(compiled.forward):
                live["upstream"] = upstream.clone()
            fence()
            start = time.perf_counter()
            kept = op(live, [])
            fence()
            per[index].append(time.perf_counter() - start)
            if kept:
                live.update(kept)
    fwd = statistics.median(t[0] for t in totals[1:])
    bwd = statistics.median(t[1] for t in totals[1:])
    print(f"{args.case} /{scale} {args.device}: fwd {fwd * 1e3:.3f} ms  bwd {bwd * 1e3:.3f} ms")
    medians = [statistics.median(p[1:]) for p in per]
    total = sum(medians)
    order = sorted(range(len(ops)), key=lambda i: -medians[i])
    for i in order[: args.top]:
        print(f"{medians[i] * 1e3:8.3f} ms {100 * medians[i] / total:5.1f}%  {names[i]}")
    return 0


def _describe(event: object) -> str:
    e = event
    if e.kind == "free":  # type: ignore[attr-defined]
        return f"free {e.tensor}"  # type: ignore[attr-defined]
    k = e.kernel  # type: ignore[attr-defined]
    text = f"{e.phase[:3]} {e.tensor} {e.op} {e.equation} n={e.elements}"  # type: ignore[attr-defined]
    if k is not None:
        text += f" [{k.kind} ws={list(k.workspace)}"
        text += " copy=" + ",".join("".join(p.copy) or "-" for p in k.inputs) + "]"
    return text


if __name__ == "__main__":
    raise SystemExit(main())
