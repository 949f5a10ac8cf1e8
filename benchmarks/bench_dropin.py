"""The drop-in einsum against torch.einsum, eager and compiled, on benchmarks/cases.json.

For each case, forward + backward (``torch.autograd.grad`` with a fixed upstream
gradient) of:

- ``torch``: torch.einsum, eager;
- ``torch-compiled``: a module calling torch.einsum, ``torch.compile(fullgraph=True)``;
- ``oe-expr``: opt_einsum's cached ``contract_expression`` on the torch backend, eager;
- ``ours``: ``einsum_analyze.torch.einsum``, eager, on a cache hit;
- ``ours-compiled``: a module calling it, ``torch.compile(fullgraph=True)``;

median time and measured peak (CUDA ``max_memory_allocated`` above the operands and
upstream gradient; cpu: the allocator's events under ``torch.profiler``), side by side,
with the ratios the issue asks for. Then the per-call overhead of a cache hit (tiny
operands, cpu, one thread) against the kernels the call launches.

    python benchmarks/bench_dropin.py --device cuda --json dropin.json
    python benchmarks/bench_dropin.py --device cpu --scale 8 --no-compile

On cpu the large dimensions are divided by --scale (default 8 on cpu, 1 on cuda). A
compile that fails is reported as skipped, with its reason; after --max-seconds (240)
no new compile starts, so that a full run stays within about five minutes.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from _common import environment, scaled  # noqa: E402

HERE = Path(__file__).parent
RUNS = ("torch", "torch-compiled", "oe-expr", "ours", "ours-compiled")


def fence(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def median_seconds(step: Callable[[], Any], device: str, repeats: int, warmup: int) -> float:
    for _ in range(warmup):
        step()
    fence(device)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        fence(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


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
               compile_runs: bool, deadline: float) -> dict[str, Callable[[], Any] | str]:
    """A forward + backward callable per run, or the reason it is skipped."""
    import opt_einsum
    import torch

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

    steps: dict[str, Callable[[], Any] | str] = {
        "torch": step_of(lambda *xs: torch.einsum(equation, *xs)),
        "oe-expr": step_of(lambda *xs: expression(*xs, backend="torch")),
        "ours": step_of(lambda *xs: einsum(equation, *xs)),
    }
    for name, module in (("torch-compiled", TorchModule()), ("ours-compiled", OurModule())):
        if not compile_runs:
            steps[name] = "compile runs not asked for (--no-compile)"
            continue
        if time.perf_counter() > deadline:
            steps[name] = "skipped: --max-seconds reached before this compile"
            continue
        try:
            torch._dynamo.reset()
            compiled = torch.compile(module, fullgraph=True, dynamic=False)
            step = step_of(compiled)
            step()  # compiles forward and backward
            steps[name] = step
        except Exception as err:  # noqa: BLE001 - reported as a skip, the run goes on
            steps[name] = f"compile failed: {type(err).__name__}: {str(err).splitlines()[0]}"
    return steps


def run_case(case: dict[str, Any], shapes: list[list[int]], args: argparse.Namespace) -> dict:
    import torch

    device = args.device
    dtype = getattr(torch, args.dtype)
    generator = torch.Generator().manual_seed(0)
    operands = [torch.randn(s, generator=generator, dtype=dtype).to(device).requires_grad_()
                for s in shapes]
    out_shape = torch.einsum(case["equation"], *[t.detach() for t in operands]).shape
    upstream = torch.randn(tuple(out_shape), generator=generator, dtype=dtype).to(device)
    steps = make_steps(case["equation"], operands, upstream, not args.no_compile,
                       args.deadline)
    results: dict[str, dict[str, Any]] = {}
    for name in RUNS:
        step = steps[name]
        if isinstance(step, str):
            results[name] = {"skipped": step}
            continue
        seconds = median_seconds(step, device, args.repeats, args.warmup)
        results[name] = {"seconds": seconds, "peak_bytes_without_inputs": peak_bytes(step, device)}
    return {"name": case["name"], "equation": case["equation"], "shapes": shapes,
            "runs": results}


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


def geomean(values: Sequence[float]) -> float:
    return math.exp(sum(map(math.log, values)) / len(values)) if values else float("nan")


def table(results: list[dict]) -> tuple[list[str], list[str]]:
    """Markdown rows and the summary lines."""
    header = ["case"] + [f"{r} ms" for r in RUNS] + [
        "ours/torch", "ours/torch-compiled", "ours-compiled/torch-compiled", "oe-expr/torch",
    ] + [f"{r} peak MiB" for r in RUNS] + ["peak ours/torch", "peak ours/torch-compiled"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    ratios: dict[str, list[float]] = {}
    worst_peak_gap: list[tuple[str, int]] = []
    for result in results:
        runs = result["runs"]

        def ms(name: str, runs: dict = runs) -> str:
            run = runs[name]
            return f"{run['seconds'] * 1e3:.3f}" if "seconds" in run else "skip"

        def mib(name: str, runs: dict = runs) -> str:
            run = runs[name]
            return (f"{run['peak_bytes_without_inputs'] / 2**20:.3f}"
                    if "seconds" in run else "skip")

        def ratio(a: str, b: str, key: str = "seconds", label: str = "",
                  runs: dict = runs) -> str:
            if key not in runs[a] or key not in runs[b] or not runs[b][key]:
                return "-"
            value = runs[a][key] / runs[b][key]
            ratios.setdefault(label or f"{a}/{b} {key}", []).append(value)
            return f"{value:.2f}"

        row = [result["name"]] + [ms(r) for r in RUNS] + [
            ratio("ours", "torch"), ratio("ours", "torch-compiled"),
            ratio("ours-compiled", "torch-compiled"), ratio("oe-expr", "torch"),
        ] + [mib(r) for r in RUNS] + [
            ratio("ours", "torch", "peak_bytes_without_inputs"),
            ratio("ours", "torch-compiled", "peak_bytes_without_inputs"),
        ]
        lines.append("| " + " | ".join(row) + " |")
        if "seconds" in runs["ours"] and "seconds" in runs["torch"]:
            worst_peak_gap.append((result["name"], runs["ours"]["peak_bytes_without_inputs"]
                                   - runs["torch"]["peak_bytes_without_inputs"]))
    summary = [f"{label}: geometric mean {geomean(values):.3f}x over {len(values)} cases"
               for label, values in ratios.items()]
    if worst_peak_gap:
        name, gap = max(worst_peak_gap, key=lambda item: item[1])
        summary.append(f"largest peak of ours above torch.einsum: {gap} B ({name}); "
                       "the issue's bound is 4096 B")
    return lines, summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--scale", type=int, default=None)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--cases", default="", help="comma-separated case names (default all)")
    parser.add_argument("--no-compile", action="store_true", help="skip the compiled runs")
    parser.add_argument("--overhead-iterations", type=int, default=2000)
    parser.add_argument("--max-seconds", type=float, default=240.0,
                        help="start no compile after this many seconds (keeps the run short)")
    parser.add_argument("--json", dest="json_path", default=None)
    args = parser.parse_args()
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            print("no CUDA device here", file=sys.stderr)
            return 2
    scale = args.scale if args.scale is not None else (1 if args.device == "cuda" else 8)
    cases = json.loads((HERE / "cases.json").read_text())["cases"]
    wanted = {name for name in args.cases.split(",") if name}
    start = time.perf_counter()
    args.deadline = start + args.max_seconds
    results = []
    for case in cases:
        if wanted and case["name"] not in wanted:
            continue
        results.append(run_case(case, scaled(case["shapes"], scale), args))
        print(f"# {case['name']} done ({time.perf_counter() - start:.0f} s)", file=sys.stderr,
              flush=True)
    overhead = per_call_overhead(args.overhead_iterations)
    env = environment(args.device)
    lines, summary = table(results)
    us = {key: value * 1e6 for key, value in overhead.items()}
    overhead_lines = [
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
                     "Peaks exclude the operands and the upstream gradient (held before).", ""]
                    + lines + [""] + summary + [""] + overhead_lines
                    + [f"\nwall: {time.perf_counter() - start:.1f} s"]))
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(
            {"environment": env, "scale": scale, "cases": results, "overhead": overhead,
             "summary": summary}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
