# ruff: noqa  (a diagnostic run once on the H200, kept as it ran)
"""recompute on tn18-b65536-bond64 after other tests in the process: measured vs predicted,
with the executor's emptied cache (as committed) and without it (empty_cache a no-op)."""
import json, sys
import pytest
import torch
from einsum_analyze import analyze, execute

CASES = {c["name"]: c for c in json.load(open("benchmarks/cases.json"))["cases"]}
real_empty = torch.cuda.empty_cache

def repro(tag):
    case = CASES["tn18-b65536-bond64"]
    free = analyze(case["equation"], case["shapes"], strategies=("reverse",), objective="memory",
                   max_search_s=None)
    budget = free.search.smallest_peak.peak_bytes + 4 * 512 * len(free.plan.steps)
    report = analyze(case["equation"], case["shapes"], strategies=("reverse",), budget=budget,
                     max_search_s=None)
    ran = execute(report, devices=["cuda"], repeats=2, warmup=1)
    for r in ran.runs:
        diff = None if r.peak_bytes_measured is None or r.peak_bytes_predicted is None else r.peak_bytes_measured - r.peak_bytes_predicted
        print(f"{tag:28s} budget {budget} {r.strategy:16s} base={r.is_baseline} predicted {r.peak_bytes_predicted} measured {r.peak_bytes_measured} diff {diff}", flush=True)

repro("fresh")
pytest.main(["-q", "-p", "no:cacheprovider", "tests/gpu/test_checkpoint_cuda.py"])
torch.cuda.empty_cache = lambda: None
repro("after-checkpoint, no empty")
torch.cuda.empty_cache = real_empty
repro("after-checkpoint, emptied")
torch.cuda.empty_cache = lambda: None
pytest.main(["-q", "-p", "no:cacheprovider", "tests/gpu/test_cuda_training.py", "-k", "recommended_plan"])
repro("after-training, no empty")
torch.cuda.empty_cache = real_empty
repro("after-training, emptied")
