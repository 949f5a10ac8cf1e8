# ruff: noqa  (a diagnostic run once on the H200, kept as it ran)
"""Where the allocator's extra bytes come from: chain3's graph pool (+8 MiB) and the
lookahead peak of tn18-b65536-bond64 (+1 MiB after the step-time tests)."""
import json, sys
from pathlib import Path
import torch

CASES = {c["name"]: c for c in json.loads(Path("benchmarks/cases.json").read_text())["cases"]}


def trace_allocs(label):
    snap = torch.cuda.memory._snapshot()
    entries = [e for dev in snap["device_traces"] for e in dev]
    big = [e for e in entries if e["action"] == "alloc"]
    print(f"== {label}: {len(big)} allocs")
    for e in big:
        frames = [f"{f['filename'].split('/')[-1]}:{f['line']}:{f['name']}" for f in e.get("frames", [])
                  if "python" not in f["filename"] or True][:6]
        print(f"  alloc {e['size']:>12} stream={e.get('stream')} {' < '.join(frames)}")
    blocks = [(b["size"], b.get("requested_size"), b["state"]) for s in snap["segments"]
              for b in s["blocks"] if b["state"] == "active_allocated"]
    over = [(s, r) for s, r, _ in blocks if r is not None and s - r >= 4096]
    print(f"  active blocks handed out over their request by >=4 KiB: {over[:20]}")


def chain3():
    from einsum_analyze.torch import einsum
    from einsum_analyze.training.choice import NO_BUDGET
    from einsum_analyze.training.graphs import pool_bytes
    from einsum_analyze.training.plans import get_plan, plan_key
    case = CASES["chain3"]
    g = torch.Generator().manual_seed(16)
    operands = [torch.randn(tuple(s), generator=g).cuda().requires_grad_(True) for s in case["shapes"]]
    einsum(case["equation"], *operands)
    plan = get_plan(*plan_key(operands, case["equation"], "auto", "auto", NO_BUDGET, [True] * len(operands)))
    slot = plan.graphs
    print("plan", plan, "graphs", slot)
    tensors = [o.detach() for o in operands]
    instance = slot.new_instance()
    instance.warm_up(plan, tensors, True)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    torch.cuda.memory._record_memory_history(max_entries=100000, stacks="python")
    instance.record(plan, True)
    torch.cuda.synchronize()
    measured = torch.cuda.max_memory_allocated() - base
    print("chain3 measured", measured, "predicted", pool_bytes(plan), "diff", measured - pool_bytes(plan))
    trace_allocs("chain3 record")
    torch.cuda.memory._record_memory_history(enabled=None)


def pooled_peak(call, context):
    """allocator_peak with the measured call's blocks in a fresh private pool."""
    import einsum_analyze.backends.torch_backend as tb
    if not context.is_cuda:
        return ORIGINAL(call, context)
    index = torch.device(context.device).index or 0
    context.fence()
    torch.cuda.empty_cache()
    pool = torch.cuda.MemPool()
    torch.cuda.reset_peak_memory_stats(index)
    base = torch.cuda.memory_allocated(index)
    with torch.cuda.use_mem_pool(pool):
        kept = call()
        context.fence()
    peak = torch.cuda.max_memory_allocated(index) - base
    del kept
    return int(peak)


def lookahead():
    import einsum_analyze.backends.torch_backend as tb
    import einsum_analyze.execution as ex
    global ORIGINAL
    ORIGINAL = tb.allocator_peak
    from einsum_analyze import analyze, execute
    for name in ("tn18-b65536-bond64", "tucker"):
        case = CASES[name]
        for label, first in (("fresh", False), ("after step times", True), ("again", False)):
            if first:
                execute(analyze(case["equation"], case["shapes"], strategies=("reverse", "independent")),
                        devices=["cuda:0"], repeats=3, warmup=1, profile_steps=True)
            for mode in ("current", "pooled"):
                tb.allocator_peak = ORIGINAL if mode == "current" else pooled_peak
                report = analyze(case["equation"], case["shapes"], strategies=("reverse", "recompute"))
                report = execute(report, devices=["cuda"], repeats=2, warmup=1)
                for run in report.runs:
                    if run.is_baseline:
                        continue
                    print(name, label, mode, run.strategy, "measured", run.peak_bytes_measured,
                          "predicted", run.peak_bytes_predicted,
                          "diff", (run.peak_bytes_measured or 0) - (run.peak_bytes_predicted or 0), flush=True)
    tb.allocator_peak = ORIGINAL


what = sys.argv[1]
if what == "chain3":
    chain3()
else:
    lookahead()
