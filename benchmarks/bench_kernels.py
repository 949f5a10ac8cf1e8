# ruff: noqa: B023  (each closure is timed inside its own loop iteration)
"""Kernel experiments for the executor, on one device (CUDA timings with events).

    python benchmarks/bench_kernels.py --device cuda

1. Tiny contracted sizes: a ``bmm`` against an elementwise sum of ``k`` products
   (``mul`` then ``addcmul`` into the output) on tn18-b65536-bond64's shapes.
2. Launch overhead: our reverse schedule's forward and backward on the small cases,
   called eagerly against one CUDA graph replay of both (captured once).

Prints one line per variant: median milliseconds over --repeats.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from einsum_analyze import analyze
from einsum_analyze.backends.torch_backend import compile_schedule, run_compiled

sys.path.insert(0, str(Path(__file__).parent))
from _common import scaled  # noqa: E402

HERE = Path(__file__).parent


def timed(call: Callable[[], Any], device: Any, repeats: int) -> float:
    """Median seconds of ``call`` (fenced each time)."""
    import torch

    fence = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    for _ in range(3):
        call()
    fence()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        fence()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def tiny_k(device: Any, repeats: int, scale: int) -> None:
    import torch

    b = 65536 // scale
    for nl, nk in ((1280, 2), (640, 2), (2560, 2), (1280, 4)):
        a = torch.randn(b, nl, nk, device=device)
        v = torch.randn(b, nk, 1, device=device)
        out = torch.empty(b, nl, 1, device=device)

        def bmm() -> None:
            torch.bmm(a, v, out=out)

        flat = out.view(b, nl)

        def elementwise() -> None:
            torch.mul(a[:, :, 0], v[:, 0], out=flat)
            for j in range(1, nk):
                flat.addcmul_(a[:, :, j], v[:, j])

        outer = torch.empty(nk, b, nl, device=device)
        outer.copy_(a.permute(2, 0, 1))

        def elementwise_outer() -> None:  # contracted label outermost: unit-stride reads
            torch.mul(outer[0], v[:, 0], out=flat)
            for j in range(1, nk):
                flat.addcmul_(outer[j], v[:, j])

        want = torch.bmm(a, v).view(b, nl)
        for name, call in (("bmm", bmm), ("mul+addcmul", elementwise),
                           ("mul+addcmul, k outermost", elementwise_outer)):
            seconds = timed(call, device, repeats)
            assert torch.allclose(flat, want, rtol=1e-4, atol=1e-4), name
            gbs = (a.numel() + flat.numel()) * 4 / seconds / 1e9
            print(f"tiny-k b={b} m={nl} k={nk}: {name:26s} {seconds * 1e3:8.3f} ms"
                  f"  ({gbs:6.0f} GB/s of A read + C written)")


def graphs(device: Any, repeats: int) -> None:
    import torch

    cases = {c["name"]: c for c in json.loads((HERE / "cases.json").read_text())["cases"]}
    for name in ("trace", "implicit", "outer-scalar", "diag-private", "chain3"):
        case = cases[name]
        shapes = scaled(case["shapes"], 1)
        report = analyze(case["equation"], shapes, dtype="float32", strategies=["reverse"])
        (strategy,) = report.strategies
        sizes = dict(report.equation.size_dict)
        compiled = compile_schedule(strategy.events, sizes)
        operands = [torch.randn(s, device=device) for s in shapes]
        upstream = torch.randn([sizes[c] for c in report.equation.output], device=device)

        def both() -> dict[str, Any]:
            live = {f"in{k}": t for k, t in enumerate(operands)}
            run_compiled(compiled.forward, live)
            live["upstream"] = upstream.clone()
            return run_compiled(compiled.backward, live)

        eager = timed(both, device, repeats)
        line = f"graphs {name:14s} eager fwd+bwd {eager * 1e6:8.1f} us"
        if device.type == "cuda":
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                for _ in range(3):
                    both()
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                kept = both()
            replay = timed(graph.replay, device, repeats)
            reserved = torch.cuda.memory_reserved()
            line += f"; one graph replay {replay * 1e6:8.1f} us (reserved {reserved} B)"
            del kept
        print(line)


def main() -> int:
    import torch

    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--scale", type=int, default=None)
    args = parser.parse_args()
    device = torch.device(args.device)
    scale = args.scale if args.scale is not None else (1 if device.type == "cuda" else 16)
    torch.backends.cuda.matmul.allow_tf32 = False
    tiny_k(device, args.repeats, scale)
    graphs(device, args.repeats)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
