# ruff: noqa  (a diagnostic run once on the H200, kept as it ran)
import json, time, torch
from pathlib import Path
from einsum_analyze.torch import einsum, cache_info, clear_cache
c = {c["name"]: c for c in json.loads(Path("benchmarks/cases.json").read_text())["cases"]}["tn18-b65536-bond64"]
ops = [torch.randn(s, device="cuda", requires_grad=True) for s in c["shapes"]]
for run in range(2):
    clear_cache(); t = time.perf_counter()
    y = einsum(c["equation"], *ops); torch.cuda.synchronize()
    ch = cache_info().choices[-1]
    print(run, f"first call {time.perf_counter()-t:.2f} s", ch.runs, "|", ch.reason[:600], flush=True)
    for _ in range(3):
        y = einsum(c["equation"], *ops); y.backward(torch.ones_like(y))
    torch.cuda.synchronize(); t = time.perf_counter()
    for _ in range(10):
        y = einsum(c["equation"], *ops); y.backward(torch.ones_like(y))
    torch.cuda.synchronize(); print("   fwd+bwd", (time.perf_counter()-t)/10*1e3, "ms", flush=True)
