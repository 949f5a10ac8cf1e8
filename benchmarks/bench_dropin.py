"""The drop-in einsum against torch.einsum, eager and compiled, with the issue's targets.

Cases: every case of benchmarks/cases.json (``--set cases``) and the model einsums of
benchmarks/model_einsums.json (``--set models``: attention, relative attention, MoE
dispatch and combine, CP, TT and Tucker layers, bilinear forms, a transpose and a
diagonal); ``--set all`` (the default) runs both. For each case, forward + backward
(``torch.autograd.grad`` with a fixed upstream gradient) of:

- ``torch``: torch.einsum, eager;
- ``torch-again``: torch.einsum, eager, once more as a run of its own: its ratio to
  ``torch`` is the noise of the run (the same kernels timed twice);
- ``torch-compiled``: a module calling torch.einsum, ``torch.compile(fullgraph=True)``;
- ``oe-expr``: opt_einsum's cached ``contract_expression`` on the torch backend, eager;
- ``ours``: ``einsum_analyze.torch.einsum``, eager, on a cache hit;
- ``ours-reverse``: the drop-in with ``strategy="reverse"``: our own plan where
  ``auto`` may run torch.einsum, a check of that choice; timed only where ``--runs``
  names it;
- ``ours-compiled``: a module calling it, ``torch.compile(fullgraph=True)``;
- ``ours-graphs``: the drop-in, eager, with ``cuda_graphs=True`` (its forward and
  backward replayed as CUDA graphs; CUDA only); timed only where ``--runs`` names it;
- ``torch-reduce-overhead``: the torch.einsum module under
  ``torch.compile(mode="reduce-overhead", fullgraph=True)`` (inductor's CUDA graphs;
  CUDA only), each step opened with ``torch.compiler.cudagraph_mark_step_begin()``;
  timed only where ``--runs`` names it (its compile is a third per case);

median time (the runs interleaved, block by block, so that a shared machine's drift
falls on all of them alike) and measured peak (CUDA ``max_memory_allocated`` above the
operands and upstream gradient; cpu: the allocator's events under ``torch.profiler``),
side by side, with what the drop-in ran and why (``cache_info().choices``). The targets:
ours within 1.03x torch.einsum's time where torch.einsum takes over 50 us and within
+10 us below that, ours' measured peak at most torch.einsum's, and the geometric mean of
ours/torch at most 0.55 over benchmarks/cases.json; and ours-graphs at most
torch-reduce-overhead's time on every case where that takes over 50 us. A time target
missed on the first pass is measured again, ours and torch.einsum (twice) alone, with
``--confirm`` (4) times the calls per block and twice the rounds; that measurement, and
torch.einsum's noise in it, decide and are shown. The peak of
``ours-graphs`` is the allocator's view of a replayed call (the result and gradients
copied out): the graphs' pool and static copies, held between calls, are not in it;
the CUDA graphs lines give them (``cache_info().choices[].graphs``). Then the per-call
overhead of a cache
hit (tiny operands, cpu, one thread) against the kernels the call launches.

    python benchmarks/bench_dropin.py --device cuda --json dropin.json
    python benchmarks/bench_dropin.py --device cuda --dtype bfloat16 --no-compile
    python benchmarks/bench_dropin.py --device cpu --threads 1 --pairs --no-compile

On cpu the large dimensions are divided by --scale (default 8 on cpu, 1 on cuda);
``--pairs`` keeps the cases of one or two operands. A compile that fails is reported as
skipped, with its reason; after --max-seconds (240) no new compile starts, so that a full
run stays within about five minutes. ``--runs`` times only the runs named (``ours`` is
always run: its choice is read from it), e.g. ``--runs torch,ours-graphs,torch-reduce-overhead``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from _common import (  # noqa: E402
    CLOCKS,
    environment,
    fence,
    interleaved_times,
    paired_ratio,
    positive_seconds,
    scaled,
    select_cases,
)
from dropin_table import RUNS, table, targets  # noqa: E402

HERE = Path(__file__).parent
DEFAULT_RUNS = tuple(run for run in RUNS
                     if run not in ("ours-reverse", "ours-graphs", "torch-reduce-overhead"))
"""The runs timed without ``--runs``: the CUDA graphs' two (a capture, and a third compile
per case) only where asked for, so that the GPU suite's step covers the cases it did
within its limit."""


CLOCK = CLOCKS["wall"]


def peak_bytes(step: Callable[[], Any], device: str) -> int:
    """The allocator's peak during ``step``, above what is held before it."""
    import torch

    if device.startswith("cuda"):
        fence(device)
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        kept = step()
        fence(device)
        peak = torch.cuda.max_memory_allocated() - base
        del kept
        return int(peak)
    from einsum_analyze.backends.torch_backend import allocator_peak_cpu

    peak, _ = allocator_peak_cpu(step)
    return int(peak)


def make_steps(equation: str, operands: Sequence[Any], upstream: Any,
               compile_runs: bool, deadline: float,
               runs: frozenset[str] = frozenset(DEFAULT_RUNS),
               ) -> dict[str, Callable[[], Any] | str]:
    """A forward + backward callable per run, or the reason it is skipped."""
    import opt_einsum
    import torch
    import torch._functorch.config
    import torch._inductor.config

    from einsum_analyze.torch import einsum

    class TorchModule(torch.nn.Module):
        def forward(self, *xs: Any) -> Any:
            return torch.einsum(equation, *xs)

    class OurModule(torch.nn.Module):
        def forward(self, *xs: Any) -> Any:
            return einsum(equation, *xs)

    expression = opt_einsum.contract_expression(equation, *[t.shape for t in operands])

    def step_of(call: Callable[..., Any]) -> Callable[[], Any]:
        def step() -> Any:
            y = call(*operands)
            return torch.autograd.grad(y, operands, upstream)

        return step

    cuda = operands[0].device.type == "cuda"
    steps: dict[str, Callable[[], Any] | str] = {
        "torch": step_of(lambda *xs: torch.einsum(equation, *xs)),
        "torch-again": step_of(lambda *xs: torch.einsum(equation, *xs)),
        "oe-expr": step_of(lambda *xs: expression(*xs, backend="torch")),
        "ours": step_of(lambda *xs: einsum(equation, *xs)),
        "ours-reverse": step_of(lambda *xs: einsum(equation, *xs, strategy="reverse")),
        "ours-graphs": (step_of(lambda *xs: einsum(equation, *xs, cuda_graphs=True)) if cuda
                        else "CUDA graphs: CUDA only"),
    }
    compiles = [("torch-compiled", TorchModule(), "default"),
                ("ours-compiled", OurModule(), "default"),
                ("torch-reduce-overhead", TorchModule(), "reduce-overhead")]
    for name, module, mode in compiles:
        if name not in runs:
            steps[name] = "not asked for (--runs)"
            continue
        if mode == "reduce-overhead" and not cuda:
            steps[name] = "reduce-overhead: CUDA only"
            continue
        if not compile_runs:
            steps[name] = "compile runs not asked for (--no-compile)"
            continue
        if time.perf_counter() > deadline:
            steps[name] = "skipped: --max-seconds reached before this compile"
            continue
        try:
            torch._dynamo.reset()
            compiled = torch.compile(module, fullgraph=True, dynamic=False, mode=mode)
            step = step_of(compiled) if mode == "default" else _marked(step_of(compiled))
            # The on-disk graph caches key on the graph, not on the plans its custom op
            # runs: a graph compiled by another checkout would carry that one's layouts.
            with (torch._inductor.config.patch(fx_graph_cache=False),
                  torch._functorch.config.patch(enable_autograd_cache=False)):
                step()  # compiles forward and backward
            steps[name] = step
        except Exception as err:  # noqa: BLE001 - reported as a skip, the run goes on
            steps[name] = f"compile failed: {type(err).__name__}: {str(err).splitlines()[0]}"
    for name in set(steps) - runs - {"ours"}:  # ours: the plan and its choice, always
        steps[name] = "not asked for (--runs)"
    return steps


def _marked(step: Callable[[], Any]) -> Callable[[], Any]:
    """``step`` opened with a new CUDA graph trees step (inductor's reduce-overhead)."""
    import torch

    def marked() -> Any:
        torch.compiler.cudagraph_mark_step_begin()
        return step()

    return marked


def run_case(case: dict[str, Any], shapes: list[list[int]], args: argparse.Namespace) -> dict:
    import torch

    from einsum_analyze.torch import cache_info

    device = args.device
    dtype = getattr(torch, args.dtype)
    generator = torch.Generator().manual_seed(0)
    operands = [torch.randn(s, generator=generator).to(device, dtype).requires_grad_()
                for s in shapes]
    out_shape = torch.einsum(case["equation"], *[t.detach() for t in operands]).shape
    upstream = torch.randn(tuple(out_shape), generator=generator).to(device, dtype)
    steps = make_steps(case["equation"], operands, upstream, not args.no_compile,
                       args.deadline, args.runs)
    ready = {name: step for name, step in steps.items() if not isinstance(step, str)}
    ready["ours"]()  # plans (a miss) before the choice is read
    choice = next(c for c in reversed(cache_info().choices)
                  if c.equation == case["equation"]
                  and c.shapes == tuple(tuple(s) for s in shapes))
    auto = auto_graphs(case["equation"], operands, upstream) if "ours-graphs" in ready else ""
    times = interleaved_times(ready, device, args.repeats, args.warmup,
                              args.min_block_seconds, clock=CLOCK)
    graphs = next(c for c in reversed(cache_info().choices)
                  if c.equation == case["equation"]
                  and c.shapes == tuple(tuple(s) for s in shapes)).graphs
    results: dict[str, dict[str, Any]] = {}
    for name in RUNS:
        step = steps[name]
        if isinstance(step, str):
            results[name] = {"skipped": step}
            continue
        results[name] = {"seconds": statistics.median(times[name]),
                         "min_seconds": min(times[name]),
                         "peak_bytes_without_inputs": peak_bytes(step, device)}
        if "torch" in times:  # the ratio of blocks taken moments apart, per round
            results[name]["paired_vs_torch"] = paired_ratio(times[name], times["torch"])
    goal = targets(results)
    if goal and not goal["time_ok"] and args.confirm > 1:
        goal = targets(results, confirm(ready, device, args))
    return {"name": case["name"], "set": case["set"], "equation": case["equation"],
            "shapes": shapes, "runs": results,
            "choice": {"runs": choice.runs, "reason": choice.reason, "graphs": graphs,
                       "auto_graphs": auto},
            "targets": goal}


CONFIRMED = ("torch", "torch-again", "ours")
"""The runs a missed time target is measured again with: ours, torch.einsum, and
torch.einsum once more (the noise of the second measurement)."""


def confirm(ready: dict[str, Callable[[], Any]], device: str,
            args: argparse.Namespace) -> dict[str, float]:
    """A missed time target measured again, with ``--confirm`` times the calls.

    Blocks of ``--confirm`` times ``--min-block-seconds`` and twice the rounds, of
    ours and torch.einsum (twice) alone: a verdict within the first pass's noise (the
    same kernels timed twice differed by up to a tenth on the H200, at blocks of a few
    milliseconds) is decided on a measurement several times as long. Returns the paired
    ratios of ours and of torch-again to torch, and the rounds.
    """
    steps = {name: ready[name] for name in CONFIRMED if name in ready}
    rounds = 2 * args.repeats
    times = interleaved_times(steps, device, rounds, 0, args.confirm * args.min_block_seconds,
                              clock=CLOCK)
    return {"ours_paired": paired_ratio(times["ours"], times["torch"]),
            "noise_paired": (paired_ratio(times["torch-again"], times["torch"])
                             if "torch-again" in times else float("nan")),
            "rounds": rounds}


def auto_graphs(equation: str, operands: Sequence[Any], upstream: Any) -> str:
    """``cuda_graphs="auto"``'s decision for this call: its ``cache_info()`` graphs line.

    The drop-in called with ``"auto"`` until the entry has decided (its deciding call
    measures the graphs against the eager call, or the prediction rules them out), before
    the runs are timed; ``ours-graphs`` (``cuda_graphs=True``) then replays the same
    entry's graphs, whatever auto decided.
    """
    import torch

    from einsum_analyze.torch import cache_info, einsum
    from einsum_analyze.training.graphs import AUTO_CAPTURE_CALLS

    for _ in range(AUTO_CAPTURE_CALLS):
        torch.autograd.grad(einsum(equation, *operands, cuda_graphs="auto"), operands,
                            upstream)
    return next(c for c in reversed(cache_info().choices) if c.equation == equation
                and c.shapes == tuple(tuple(t.shape) for t in operands)).graphs


def per_call_overhead(iterations: int) -> dict[str, float]:
    """Seconds per call of the drop-in on a cache hit, and of the kernels it launches.

    Tiny operands on cpu, one thread: the difference is the Python and dispatch overhead
    of the call (custom op, plan lookup, autograd node), forward and forward + backward.
    "The kernels" are the plan's compiled events run on ready-made live tensors (no
    plan lookup, no autograd, the upstream gradient taken in place as the drop-in takes
    it). Forward + backward goes through ``autograd.grad``, whose own per-call cost any
    op pays (torch.einsum too): it is measured through ``torch.mm`` and reported apart.
    """
    import torch

    from einsum_analyze.torch import einsum
    from einsum_analyze.training.plans import get_plan

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        equation, shapes = "ij,jk->ik", ((4, 4), (4, 4))
        a, b = (torch.randn(s, requires_grad=True) for s in shapes)
        upstream = torch.randn(4, 4)
        plan = get_plan(equation, shapes, "float32", "cpu", (True, True), "auto", "auto", -1)
        da, db = a.detach(), b.detach()
        forward_ops, backward_ops = plan.compiled.forward, plan.compiled.backward

        def run(ops: Any, live: dict[str, Any]) -> dict[str, Any]:
            for op in ops:
                kept = op(live, [])
                if kept:
                    live.update(kept)
            return live

        # The kernels alone: the plan's compiled events on ready-made live tensors, the
        # upstream gradient taken as the drop-in takes it (in place, never copied).
        def kernels_forward() -> Any:
            with torch.no_grad():
                return run(forward_ops, {"in0": da, "in1": db})[plan.output]

        def kernels_both() -> Any:
            with torch.no_grad():
                live = run(forward_ops, {"in0": da, "in1": db})
                live["upstream"] = upstream
                return run(backward_ops, live)

        def mm_kernels() -> Any:
            with torch.no_grad():
                y = torch.mm(da, db)
                return y, torch.mm(upstream, db.t()), torch.mm(da.t(), upstream)

        def mm_both() -> Any:
            return torch.autograd.grad(torch.mm(a, b), (a, b), upstream)

        def ours_forward() -> Any:
            with torch.no_grad():
                return einsum(equation, a, b)

        def ours_both() -> Any:
            return torch.autograd.grad(einsum(equation, a, b), (a, b), upstream)

        class Nothing(torch.autograd.Function):
            """An autograd node that computes nothing: the engine's own cost."""

            @staticmethod
            def forward(ctx: Any, x: Any, y: Any) -> Any:
                return x.view_as(x)

            @staticmethod
            def backward(ctx: Any, grad: Any) -> Any:
                return grad, grad

        def engine_floor() -> Any:
            return torch.autograd.grad(Nothing.apply(a, b), (a, b), upstream)

        def torch_forward() -> Any:
            with torch.no_grad():
                return torch.einsum(equation, a, b)

        def torch_both() -> Any:
            return torch.autograd.grad(torch.einsum(equation, a, b), (a, b), upstream)

        def per_call(call: Callable[[], Any]) -> float:
            for _ in range(200):
                call()
            blocks = []
            for _ in range(5):
                start = time.perf_counter()
                for _ in range(iterations):
                    call()
                blocks.append((time.perf_counter() - start) / iterations)
            return min(blocks)

        figures = {
            "kernels_forward_s": per_call(kernels_forward),
            "kernels_forward_backward_s": per_call(kernels_both),
            "ours_forward_s": per_call(ours_forward),
            "ours_forward_backward_s": per_call(ours_both),
            "torch_forward_s": per_call(torch_forward),
            "torch_forward_backward_s": per_call(torch_both),
            "autograd_floor_s": per_call(engine_floor),
            "mm_kernels_s": per_call(mm_kernels),
            "mm_forward_backward_s": per_call(mm_both),
        }
        figures["overhead_forward_s"] = figures["ours_forward_s"] - figures["kernels_forward_s"]
        figures["overhead_forward_backward_s"] = (
            figures["ours_forward_backward_s"] - figures["kernels_forward_backward_s"]
        )
        figures["overhead_forward_backward_beyond_autograd_s"] = (
            figures["overhead_forward_backward_s"] - figures["autograd_floor_s"]
        )
        # What autograd costs any op beyond its kernels: autograd.grad through torch.mm
        # (one C++ node), less mm's three kernels. torch.einsum pays it too.
        figures["autograd_per_call_s"] = (figures["mm_forward_backward_s"]
                                          - figures["mm_kernels_s"])
        figures["overhead_beyond_autograd_per_call_s"] = (
            figures["overhead_forward_backward_s"] - figures["autograd_per_call_s"]
        )
        return figures
    finally:
        torch.set_num_threads(threads)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--scale", type=int, default=None)
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
    parser.add_argument("--set", dest="case_set", default="all",
                        choices=("all", "cases", "models"),
                        help="benchmarks/cases.json, benchmarks/model_einsums.json, or both")
    parser.add_argument("--pairs", action="store_true",
                        help="only the cases of one or two operands")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (cpu)")
    parser.add_argument("--clock", choices=tuple(CLOCKS), default=None,
                        help="wall (default on cuda) or the process's cpu time (default "
                        "on cpu)")
    parser.add_argument("--min-block-seconds", type=float, default=2e-3,
                        help="calls per timed block grow until a block lasts this long")
    parser.add_argument("--cases", default="", help="comma-separated case names (default all)")
    parser.add_argument("--no-compile", action="store_true", help="skip the compiled runs")
    parser.add_argument("--runs", default="", help="comma-separated runs to time, of "
                        f"{', '.join(RUNS)} (default: all but ours-graphs and "
                        "torch-reduce-overhead); ours is always run, for its choice")
    parser.add_argument("--confirm", type=int, default=4,
                        help="measure a missed time target again with this many times the "
                        "calls per block, and twice the rounds (1: never)")
    parser.add_argument("--overhead-iterations", type=int, default=2000)
    parser.add_argument("--max-seconds", type=positive_seconds, default=240.0,
                        help="start no compile after this many seconds (keeps the run short)")
    parser.add_argument("--json", dest="json_path", default=None)
    args = parser.parse_args()
    asked = {name for name in args.runs.split(",") if name}
    if asked - set(RUNS):
        print(f"--runs: unknown {', '.join(sorted(asked - set(RUNS)))}; runs are "
              f"{', '.join(RUNS)}", file=sys.stderr)
        return 2
    args.runs = frozenset(asked or DEFAULT_RUNS)
    cases = []
    for group, file in (("cases", "cases.json"), ("models", "model_einsums.json")):
        if args.case_set in ("all", group):
            cases += [{**c, "set": group}
                      for c in json.loads((HERE / file).read_text())["cases"]]
    cases = select_cases(cases, args.cases)
    if args.pairs:
        cases = [c for c in cases if len(c["shapes"]) <= 2]
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device here", file=sys.stderr)
        return 2

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    global CLOCK
    args.clock = args.clock or ("wall" if args.device == "cuda" else "cpu")
    if args.device == "cuda" and args.clock == "cpu":
        print("--clock cpu times the host only; use --clock wall on cuda", file=sys.stderr)
        return 2
    CLOCK = CLOCKS[args.clock]
    torch.backends.cuda.matmul.allow_tf32 = False  # float32 is float32, as torch's default
    scale = args.scale if args.scale is not None else (1 if args.device == "cuda" else 8)
    start = time.perf_counter()
    args.deadline = start + args.max_seconds
    results = []
    for case in cases:
        results.append(run_case(case, scaled(case["shapes"], scale), args))
        print(f"# {case['name']} done ({time.perf_counter() - start:.0f} s)", file=sys.stderr,
              flush=True)
    overhead = per_call_overhead(args.overhead_iterations) if args.overhead_iterations else {}
    env = {**environment(args.device), "dtype": args.dtype, "clock": args.clock,
           "load_average_1min": round(os.getloadavg()[0], 2),
           "command": " ".join(["python"] + sys.argv)}
    lines, summary = table(results)
    us = {key: value * 1e6 for key, value in overhead.items()}
    overhead_lines = [] if not us else [
        "Per-call overhead on a cache hit (ij,jk->ik, 4x4, cpu, one thread), microseconds:",
        f"  forward: ours {us['ours_forward_s']:.1f}, its kernels {us['kernels_forward_s']:.1f}, "
        f"overhead {us['overhead_forward_s']:.1f}; torch.einsum {us['torch_forward_s']:.1f}",
        f"  forward+backward: ours {us['ours_forward_backward_s']:.1f}, its kernels "
        f"{us['kernels_forward_backward_s']:.1f}, overhead "
        f"{us['overhead_forward_backward_s']:.1f}; torch.einsum "
        f"{us['torch_forward_backward_s']:.1f}",
        f"  autograd's own floor (autograd.grad through a node that computes nothing): "
        f"{us['autograd_floor_s']:.1f}; overhead beyond it "
        f"{us['overhead_forward_backward_beyond_autograd_s']:.1f}",
        f"  autograd's per-call cost for any op (autograd.grad through torch.mm, less its "
        f"three kernels): {us['autograd_per_call_s']:.1f}; the drop-in's overhead beyond "
        f"it {us['overhead_beyond_autograd_per_call_s']:.1f}",
    ]
    print("\n".join(["Environment: " + json.dumps(env), f"scale: /{scale}", "",
                     "Peaks exclude the operands and the upstream gradient (held before); "
                     "ours-graphs' exclude its pool and static copies (held between calls).",
                     ""]
                    + lines + [""] + summary + [""] + overhead_lines
                    + [f"\nwall: {time.perf_counter() - start:.1f} s"]))
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(
            {"environment": env, "scale": scale, "cases": results, "overhead": overhead,
             "summary": summary}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
