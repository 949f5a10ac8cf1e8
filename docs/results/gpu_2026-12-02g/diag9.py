# ruff: noqa  (a diagnostic run once on the H200, kept as it ran)
"""Where torch.einsum's fwd+bwd device time goes on tn18-b65536-bond64 and mps-layer:
each CUDA kernel's total over 5 calls (torch.profiler), against the call's wall time."""
import json, sys, time
import torch
from torch.profiler import profile, ProfilerActivity

cases = {c["name"]: c for c in json.load(open("benchmarks/cases.json"))["cases"]}
torch.backends.cuda.matmul.allow_tf32 = False
for name in sys.argv[1:]:
    c = cases[name]
    ops = [torch.randn(s, device="cuda") for s in c["shapes"]]
    def call():
        leaves = [t.detach().requires_grad_(True) for t in ops]
        out = torch.einsum(c["equation"], *leaves)
        return torch.autograd.grad(out, leaves, torch.ones_like(out))
    for _ in range(3):
        call()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(5):
        call()
    torch.cuda.synchronize()
    wall = (time.perf_counter() - t0) / 5
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
        for _ in range(5):
            call()
        torch.cuda.synchronize()
    rows = [r for r in p.key_averages() if r.device_time_total > 0]
    total = sum(r.self_device_time_total for r in rows) / 5
    print(f"== {name}: wall {wall*1e3:.3f} ms/call, kernels {total/1e3:.3f} ms/call")
    for r in sorted(rows, key=lambda r: -r.self_device_time_total)[:22]:
        if r.self_device_time_total <= 0:
            continue
        print(f"  {r.key[:70]:70s} n={r.count/5:5.1f} {r.self_device_time_total/5/1e3:8.3f} ms")
