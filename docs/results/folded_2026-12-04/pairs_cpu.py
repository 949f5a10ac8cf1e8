# ruff: noqa  (a paired CPU measurement of pair einsums, kept as it ran)
"""Pair einsums on the cpu, one thread, forward + backward (autograd.grad, fixed upstream):
torch.einsum against the drop-in, CPU microseconds per call, blocks of 200 calls
interleaved, the median of 11; and what the drop-in ran.

    PYTHONPATH=$PWD python docs/results/folded_2026-12-04/pairs_cpu.py
"""
import time, torch, statistics, sys
from einsum_analyze import torch as dropin
from einsum_analyze.training import plans
torch.set_num_threads(1)
eqs = {
 "i,d->id": [(64,),(32,)], "i,d->id/L": [(512,),(256,)], "bi,bj->bij": [(16,32),(16,24)],
 "ij,j->ij": [(64,32),(32,)], "ij,ij->i": [(128,64),(128,64)], "ij,ij->": [(128,64),(128,64)],
 "bi,i->b": [(256,64),(64,)], "bnd,nd->bn": [(32,8,16),(8,16)], "ij,kj->ik": [(64,32),(48,32)],
 "bhid,bhjd->bhij": [(2,4,32,16),(2,4,32,16)], "i,i->": [(1000,),(1000,)], "ij,jk->ik": [(32,32),(32,32)],
 "ijk,k->ij": [(16,16,16),(16,)], "b,bd->bd": [(64,),(64,32)], "bd,d->bd": [(64,32),(32,)],
}
for name, shapes in eqs.items():
    eq = name.split("/")[0]
    xs = [torch.randn(s, requires_grad=True) for s in shapes]
    up = torch.randn_like(torch.einsum(eq, *xs))
    def t(): torch.autograd.grad(torch.einsum(eq, *xs), xs, up)
    def o(): torch.autograd.grad(dropin.einsum(eq, *xs), xs, up)
    o(); ch = plans.cache_info().choices[-1]
    for f in (t,o): f(); f()
    res = {"t": [], "o": []}
    for r in range(11):
        for n, f in (("t",t),("o",o)) if r % 2 else (("o",o),("t",t)):
            s = time.process_time()
            for _ in range(200): f()
            res[n].append((time.process_time()-s)/200*1e6)
    tm, om = statistics.median(res["t"]), statistics.median(res["o"])
    flag = "SLOWER" if om > max(1.03*tm, tm+10) else ""
    print(f"{name:18} torch {tm:7.1f} us ours {om:7.1f} us {om/tm:5.2f} {ch.runs:14} {flag}")
