#!/usr/bin/env python3
"""Training within a memory budget: the drop-in against torch.compile's own budget.

The user's alternative to a planned budget is ``torch.compile`` under
``torch._functorch.config.activation_memory_budget``: the partitioner then recomputes in
backward what it would otherwise keep. For each case of ``benchmarks/cases.json``
(every operand differentiated), in one run:

- eager torch.einsum + ``torch.autograd.grad``;
- compiled torch.einsum (``fullgraph=True``) under ``activation_memory_budget`` 1.0, 0.5
  and 0.0;
- for each distinct peak P those compiled runs measured, the drop-in
  (``einsum_analyze.torch.einsum``, ``strategy="auto"``) with ``budget=P``, and the
  drop-in without a budget.

Each run: the median seconds of forward + backward (blocks of calls interleaved run by run,
as bench_dropin.py times them), and the measured peak, counted as the
drop-in's budget counts it: the inputs, everything the step allocates (the forward's
output held through backward, the upstream gradient made between the two phases, the
gradients). On CUDA the allocator's ``max_memory_allocated``; on the cpu the allocator's
events (``torch.profiler``). "fits" says whether the drop-in measured at most P (a budget is
a guarantee); "x compiled" is its time over the compiled run's that reached P.

Usage::

    python benchmarks/bench_budgets.py --device cuda --scale 1 --models --json out.json
    python benchmarks/bench_budgets.py --device cpu --cases mps-layer,tucker --scale 8
"""

# ruff: noqa: T201

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
import _common  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

BUDGETS = (1.0, 0.5, 0.0)
"""``activation_memory_budget`` values of the compiled runs."""


class Step:
    """One run's forward + backward on the case's operands, timed and measured."""

    def __init__(self, contract: Callable[..., Any], operands: Sequence[Any],
                 upstream: Any) -> None:
        self.contract, self.operands, self.upstream = contract, list(operands), upstream

    def __call__(self) -> Any:
        import torch

        y = self.contract(*self.operands)
        made = self.upstream.clone()  # made between the phases, held through backward
        return torch.autograd.grad(y, self.operands, made)


def peak_bytes(step: Step, device: str) -> int:
    """The step's peak, its inputs counted (not the upstream template it clones)."""
    import torch

    inputs = sum(t.numel() * t.element_size() for t in step.operands)
    if device.startswith("cuda"):
        _common.fence(device)
        torch.cuda.empty_cache()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        kept = step()
        _common.fence(device)
        peak = torch.cuda.max_memory_allocated() - base
        del kept
        return int(peak + inputs)
    from einsum_analyze.backends.torch_backend import allocator_peak_cpu

    peak, _ = allocator_peak_cpu(step)
    return int(peak + inputs)


def compiled(equation: str, budget: float) -> Callable[..., Any]:
    """torch.einsum compiled under ``activation_memory_budget=budget`` (compiles lazily)."""
    import torch

    def contract(*xs: Any) -> Any:
        return torch.einsum(equation, *xs)

    return torch.compile(contract, fullgraph=True, dynamic=False)


def run_case(case: dict[str, Any], args: argparse.Namespace, device: str) -> dict[str, Any]:
    import torch
    import torch._dynamo
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config

    import einsum_analyze.torch as dropin
    from einsum_analyze.errors import DropinError

    equation = case["equation"]
    shapes = _common.scaled(case["shapes"], args.scale)
    dtype = getattr(torch, args.dtype)
    generator = torch.Generator().manual_seed(0)
    operands = [torch.randn(s, generator=generator).to(device, dtype).requires_grad_()
                for s in shapes]
    with torch.no_grad():
        out_shape = torch.einsum(equation, *operands).shape
    upstream = torch.randn(tuple(out_shape), generator=generator).to(device, dtype)
    row: dict[str, Any] = {"case": case["name"], "shapes": shapes, "runs": {}}
    steps: dict[str, Step] = {
        "eager": Step(lambda *xs: torch.einsum(equation, *xs), operands, upstream)}
    for budget in BUDGETS:
        torch._dynamo.reset()
        step = Step(compiled(equation, budget), operands, upstream)
        # The partitioner reads the budget when it compiles (the first call); the
        # on-disk caches would hand one budget's graph to another.
        with (functorch_config.patch(activation_memory_budget=budget,
                                     enable_autograd_cache=False),
              inductor_config.patch(fx_graph_cache=False)):
            step()
        steps[f"compiled@{budget:g}"] = step
    peaks = {name: peak_bytes(step, device) for name, step in steps.items()}
    wanted = sorted({peaks[f"compiled@{b:g}"] for b in BUDGETS}, reverse=True)
    dropin.clear_cache()
    steps["drop-in"] = Step(lambda *xs: dropin.einsum(equation, *xs), operands, upstream)
    steps["drop-in"]()  # plans
    plans = {"drop-in": dropin.cache_info().choices[-1].runs}  # a miss is the newest
    peaks["drop-in"] = peak_bytes(steps["drop-in"], device)
    for budget in wanted:
        name = f"drop-in@{budget}"

        def ours(*xs: Any, budget: int = budget) -> Any:
            return dropin.einsum(equation, *xs, budget=budget)

        step = Step(ours, operands, upstream)
        try:
            step()  # plans within the budget, or says what is the least it reaches
        except DropinError as err:
            row["runs"][name] = {"budget_bytes": budget, "none_fits": str(err)}
            continue
        steps[name] = step
        plans[name] = dropin.cache_info().choices[-1].runs
        peaks[name] = peak_bytes(step, device)
    times = _common.interleaved_medians(steps, device, args.repeats, args.warmup,
                                        args.min_block_seconds)
    for name in steps:
        row["runs"][name] = {"time_s": times[name], "peak_bytes": peaks[name]}
    for name, plan in plans.items():
        row["runs"][name]["plan"] = plan
    for budget in wanted:
        cell = row["runs"][f"drop-in@{budget}"]
        cell["budget_bytes"] = budget
        if "peak_bytes" in cell:
            cell["fits"] = cell["peak_bytes"] <= budget
    return row


def size(value: int | None) -> str:
    from einsum_analyze.model.units import format_bytes

    return "-" if value is None else format_bytes(value)


def table(rows: list[dict[str, Any]]) -> list[list[str]]:
    """One line per case and compiled budget: the compiled run, and the drop-in at its peak."""
    lines = [["case", "budget", "compiled ms", "peak", "drop-in ms", "drop-in peak",
              "fits", "x compiled", "x eager", "drop-in ran"]]
    for row in rows:
        runs = row["runs"]
        eager = runs["eager"]["time_s"]
        for budget in BUDGETS:
            comp = runs[f"compiled@{budget:g}"]
            ours = runs.get(f"drop-in@{comp['peak_bytes']}", {})
            if "none_fits" in ours:
                cells = ["none fits", "-", "-", "-", "-", "-"]
            else:
                cells = [f"{ours['time_s'] * 1e3:.3f}", size(ours["peak_bytes"]),
                         "yes" if ours["fits"] else "NO",
                         f"{ours['time_s'] / comp['time_s']:.2f}",
                         f"{ours['time_s'] / eager:.2f}", ours["plan"]]
            lines.append([row["case"], f"{budget:g}", f"{comp['time_s'] * 1e3:.3f}",
                          size(comp["peak_bytes"]), *cells])
        free = runs["drop-in"]
        lines.append([row["case"], "none", f"eager {eager * 1e3:.3f}",
                      size(runs["eager"]["peak_bytes"]), f"{free['time_s'] * 1e3:.3f}",
                      size(free["peak_bytes"]), "-", "-", f"{free['time_s'] / eager:.2f}",
                      free["plan"]])
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    _common.add_case_options(parser)
    parser.add_argument("--min-block-seconds", type=_common.positive_seconds, default=2e-3,
                        help="calls per timed block grow until a block lasts this long")
    parser.add_argument("--models", action="store_true",
                        help="the model einsums too (benchmarks/model_einsums.json)")
    args = parser.parse_args()
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False  # float32 is float32, as torch's default
    device, cases = _common.read_cases(args, models=args.models)
    limit = _common.TimeLimit(args.max_seconds)
    rows = []
    for case in limit.cases(cases):
        rows.append(run_case(case, args, device))
        print(f"# {case['name']} done", file=sys.stderr, flush=True)
    lines = table(rows)
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    for line in lines:
        print("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True))
              .rstrip())
    cells = [r["runs"][k] for r in rows for k in r["runs"] if k.startswith("drop-in@")]
    ran = [c for c in cells if "fits" in c]
    print(f"\ndrop-in at the compiled runs' peaks: {sum(c['fits'] for c in ran)} of "
          f"{len(ran)} measured within the budget; no plan fits {len(cells) - len(ran)}")
    limit.report()
    _common.finish(device, rows, args.json, dtype=args.dtype, scale=args.scale,
                   left_out=limit.left_out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
