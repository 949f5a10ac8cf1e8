# ruff: noqa  (a diagnostic run once on the H200, kept as it ran)
"""Session 6: which sequence of drop-in calls on tn18-b65536-bond64 hits the illegal access."""
import json, sys, torch
from einsum_analyze.torch import einsum, cache_info
seq = sys.argv[1]
case = next(c for c in json.load(open("benchmarks/cases.json"))["cases"] if c["name"] == "tn18-b65536-bond64")
eq = case["equation"]; shapes = case["shapes"]
g = torch.Generator(device="cuda").manual_seed(0)
ops = [torch.randn(*s, device="cuda", generator=g).requires_grad_() for s in shapes]
def call(mode):
    y = einsum(eq, *ops, cuda_graphs=mode)
    up = torch.ones_like(y)
    gs = torch.autograd.grad(y, ops, up)
    torch.cuda.synchronize()
    return y, gs
ref = None
for k, token in enumerate(seq.split(",")):
    mode = {"T": True, "F": False, "A": "auto"}[token]
    y, gs = call(mode)
    if ref is None:
        ref = (y.detach().clone(), [x.clone() for x in gs])
    err = max(float((a - b).abs().max()) for a, b in zip(gs, ref[1]))
    print(f"call {k} mode={mode!r}: ok, max grad diff to first {err:.3g}", flush=True)
for c in cache_info().choices:
    print(c.graphs)
