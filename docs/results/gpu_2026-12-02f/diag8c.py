# ruff: noqa  (a diagnostic run once on the H200, kept as it ran)
"""Where the eager drop-in's host time goes on CUDA: tn18-b512 and mps-layer, fwd+bwd,
timed in blocks, then cProfile of 100 calls (by own time)."""
import cProfile, json, pstats, sys, time
import torch
torch.backends.cuda.matmul.allow_tf32 = False
from einsum_analyze.torch import einsum, cache_info
cases = {c["name"]: c for c in json.load(open("benchmarks/cases.json"))["cases"]}
dev = sys.argv[2] if len(sys.argv) > 2 else "cuda"
for name in sys.argv[1].split(","):
    c = cases[name]
    g = torch.Generator().manual_seed(0)
    ops = [torch.randn(s, generator=g).to(dev).requires_grad_() for s in c["shapes"]]
    out = torch.einsum(c["equation"], *ops)
    up = torch.randn(out.shape, generator=g).to(dev)
    def ours():
        torch.autograd.grad(einsum(c["equation"], *ops), ops, up)
    def fwd():
        with torch.no_grad():
            einsum(c["equation"], *ops)
    def theirs():
        torch.autograd.grad(torch.einsum(c["equation"], *ops), ops, up)
    for _ in range(30): ours(); theirs(); fwd()
    torch.cuda.synchronize() if dev == "cuda" else None
    ch = [x for x in cache_info().choices if x.equation == c["equation"]][-1]
    print(f"== {name} on {dev}: {ch.runs} {ch.reason[:160]}")
    for f, n in ((ours, "ours fwd+bwd"), (fwd, "ours fwd (no grad)"), (theirs, "torch fwd+bwd")):
        best = []
        for _ in range(5):
            t = time.perf_counter()
            for _ in range(50): f()
            torch.cuda.synchronize() if dev == "cuda" else None
            best.append((time.perf_counter() - t) / 50)
        print(f"   {n:<20} {min(best)*1e3:.3f} ms/call (min of 5 blocks of 50)")
    # host only: time to queue a call (no sync in the loop)
    t = time.perf_counter()
    for _ in range(50): ours()
    q = (time.perf_counter() - t) / 50
    torch.cuda.synchronize() if dev == "cuda" else None
    print(f"   ours host queue     {q*1e3:.3f} ms/call")
    p = cProfile.Profile(); p.enable()
    for _ in range(100): ours()
    torch.cuda.synchronize() if dev == "cuda" else None
    p.disable()
    pstats.Stats(p).sort_stats("tottime").print_stats(22)
    sys.stdout.flush()
