# ruff: noqa  (a diagnostic run once on the H200, kept as it ran)
"""(a) which op of recompute on tn18-b65536-bond64 reaches above the predicted peak on CUDA;
(b) XLNet step patched vs not: kernels, host time, cProfile of the drop-in."""
import cProfile, io, json, pstats, sys, time
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from einsum_analyze import analyze, execute

CASES = {c["name"]: c for c in json.load(open("benchmarks/cases.json"))["cases"]}

class Peaks(TorchDispatchMode):
    def __init__(self):
        super().__init__(); self.rows = []
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        torch.cuda.synchronize(); torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        out = func(*args, **(kwargs or {}))
        torch.cuda.synchronize()
        after = torch.cuda.memory_allocated(); peak = torch.cuda.max_memory_allocated()
        shapes = [tuple(a.shape) for a in args if isinstance(a, torch.Tensor)]
        self.rows.append((str(func), shapes, before, after, peak, peak - max(before, after)))
        return out

case = CASES["tn18-b65536-bond64"]
free = analyze(case["equation"], case["shapes"], strategies=("reverse",), objective="memory")
budget = free.search.smallest_peak.peak_bytes + 4 * 512 * len(free.plan.steps)
report = analyze(case["equation"], case["shapes"], strategies=("reverse",), budget=budget)
print("budget", budget, "recommended", report.recommended.label, flush=True)
ran = execute(report, devices=["cuda"], repeats=2, warmup=1)
for r in ran.runs:
    print("run", r.strategy, r.is_baseline, r.peak_bytes_predicted, r.peak_bytes_measured, flush=True)
mode = Peaks()
with mode:
    execute(report, devices=["cuda"], repeats=1, warmup=0)
rows = sorted(mode.rows, key=lambda r: -r[4])[:12]
for r in rows:
    print(f"peak {r[4]:>12,} transient {r[5]:>10,} before {r[2]:>12,} after {r[3]:>12,} {r[0]} {r[1]}")
trans = sorted(mode.rows, key=lambda r: -r[5])[:12]
print("largest transients:")
for r in trans:
    print(f"transient {r[5]:>10,} peak {r[4]:>12,} {r[0]} {r[1]}")
sys.stdout.flush()

# (b) XLNet
sys.path.insert(0, "benchmarks")
import bench_models as bm
import einsum_analyze.torch as dropin
size = bm.SIZES["full"]
torch.manual_seed(0)
model = bm.MODELS["xlnet"](size).cuda().train()
ids = torch.randint(0, size["vocab"], (size["batch"], size["length"])).cuda()
step = bm.training_step(model, ids, ids)
pt = dropin.patch()
def patched():
    with pt:
        return step()
for _ in range(5):
    step(); patched()
def timed(f):
    torch.cuda.synchronize(); t = time.perf_counter(); f(); torch.cuda.synchronize(); return time.perf_counter() - t
def host(f):
    torch.cuda.synchronize(); t = time.perf_counter(); f(); h = time.perf_counter() - t; torch.cuda.synchronize(); return h
a, b, ha, hb = [], [], [], []
for i in range(30):
    a.append(timed(step)); b.append(timed(patched)); ha.append(host(step)); hb.append(host(patched))
import statistics as s
print(f"xlnet step plain {s.median(a)*1e3:.3f} ms patched {s.median(b)*1e3:.3f} ms ratio {s.median(b)/s.median(a):.3f}; "
      f"host-only plain {s.median(ha)*1e3:.3f} patched {s.median(hb)*1e3:.3f}", flush=True)
from torch.profiler import profile, ProfilerActivity
for name, f in (("plain", step), ("patched", patched)):
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        f(); torch.cuda.synchronize()
    ev = prof.key_averages()
    dev = sum(e.self_device_time_total for e in ev)
    print(f"{name}: device self total {dev/1e3:.3f} ms, kernels:", flush=True)
    print(ev.table(sort_by="self_device_time_total", row_limit=12, max_name_column_width=60))
pr = cProfile.Profile(); pr.enable()
for _ in range(5):
    patched()
pr.disable(); torch.cuda.synchronize()
st = io.StringIO(); pstats.Stats(pr, stream=st).sort_stats("cumulative").print_stats(25); print(st.getvalue()[:6000])
