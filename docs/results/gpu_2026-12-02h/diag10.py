# ruff: noqa  (a diagnostic run once on the H200, kept as it ran)
"""Every bmm/mm of torch.einsum's fwd+bwd on a case, replayed alone with its own shapes and
strides (a dispatch mode records them), timed with CUDA events; then candidate shapes of
batched products with a tiny per-batch output, for a kernel class."""
import json, sys
import torch
from torch.utils._python_dispatch import TorchDispatchMode

DEV = "cuda" if torch.cuda.is_available() else "cpu"
torch.backends.cuda.matmul.allow_tf32 = False
cases = {c["name"]: c for c in json.load(open("benchmarks/cases.json"))["cases"]}


class Record(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func.overloadpacket.__name__)
        if name in ("bmm", "mm", "mul", "sum", "clone", "copy_", "mv", "dot"):
            ts = [(tuple(a.shape), tuple(a.stride())) for a in args if isinstance(a, torch.Tensor)]
            self.calls.append((name, ts))
        return func(*args, **(kwargs or {}))


def timed(fn, reps=20):
    if DEV == "cpu":
        import time
        t = time.perf_counter(); fn(); return (time.perf_counter() - t) * 1e3
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = float("inf")
    for _ in range(3):
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        torch.cuda.synchronize()
        best = min(best, start.elapsed_time(end) / reps)
    return best


def strided(shape, stride):
    size = 1 + sum((s - 1) * st for s, st in zip(shape, stride)) if all(shape) else 0
    return torch.ones(size, device=DEV).as_strided(shape, stride)


for name in sys.argv[1:]:
    c = cases[name]
    ops = [torch.randn(s, device=DEV) for s in c["shapes"]]
    leaves = [t.detach().requires_grad_(True) for t in ops]
    out = torch.einsum(c["equation"], *leaves)
    seed = torch.ones_like(out)
    rec = Record()
    with rec:
        torch.autograd.grad(out, leaves, seed)
    print(f"== {name}: backward's calls, each replayed alone (ms)")
    total = 0.0
    for op, ts in rec.calls:
        if op not in ("bmm", "mm"):
            continue
        a, b = (strided(*t) for t in ts[:2])
        ms = timed(lambda: getattr(torch, op)(a, b))
        total += ms
        print(f"  {op:4s} {str(ts[0]):44s} x {str(ts[1]):44s} {ms:8.3f}")
    print(f"  products total {total:.3f} ms; other calls: "
          + ", ".join(f"{k} {sum(1 for o, _ in rec.calls if o == k)}" for k in ("mul", "sum", "clone", "copy_")))

print("== candidates: bmm of (B, M, K) by (B, K, N), ms and GB/s (bytes read and written)")
Bs = (4096, 16384, 65536) if DEV == "cuda" else (64,)
for B in Bs:
    for K in (10, 40, 160, 640, 1280, 2560):
        shapes = {  # torch.einsum's layouts (the dispatch record above)
            "outer 2x1.1xK": (torch.ones(B, 2, 1, device=DEV), torch.ones(B, 1, K, device=DEV)),
            "outer Kx1.1x2": (torch.ones(B, K, 1, device=DEV), torch.ones(B, 1, 2, device=DEV)),
            "dot 1xK.Kx2^T": (torch.ones(B, 1, K, device=DEV),
                              torch.ones(B, 2, K, device=DEV).transpose(1, 2)),
            "dot 2xK.Kx1": (torch.ones(B, 2, K, device=DEV), torch.ones(B, K, 1, device=DEV)),
        }
        for label, (x, y) in shapes.items():
            ms = timed(lambda: torch.bmm(x, y))
            gb = 4 * (x.numel() + y.numel() + B * x.shape[1] * y.shape[2]) / 1e9
            print(f"  B={B:6d} K={K:5d} {label:15s} {ms:8.4f} ms {gb / ms * 1e3:8.1f} GB/s")
