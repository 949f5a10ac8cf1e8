# ruff: noqa  (a diagnostic run once on the H200, kept as it ran)
"""The budget test's plan under search deadlines like a loaded suite's: which plan, predicted vs measured."""
import json
from einsum_analyze import analyze, execute
CASES = {c["name"]: c for c in json.load(open("benchmarks/cases.json"))["cases"]}
case = CASES["tn18-b65536-bond64"]
for limit in (0.02, 0.05, 0.1, 0.2, 0.4, 0.8, None):
    free = analyze(case["equation"], case["shapes"], strategies=("reverse",), objective="memory", max_search_s=limit)
    budget = free.search.smallest_peak.peak_bytes + 4 * 512 * len(free.plan.steps)
    report = analyze(case["equation"], case["shapes"], strategies=("reverse",), budget=budget, max_search_s=limit)
    rec = report.recommended
    ran = execute(report, devices=["cuda"], repeats=1, warmup=1)
    names = {rec.label, getattr(rec, "run_label", rec.label), rec.plan.strategy}
    run = [r for r in ran.runs if r.strategy in names and not r.is_baseline][0]
    print(f"limit {limit} budget {budget} plan {rec.plan.strategy} on {rec.plan.source} path {rec.plan.path} predicted {run.peak_bytes_predicted} measured {run.peak_bytes_measured} diff {run.peak_bytes_measured - run.peak_bytes_predicted} over budget {run.peak_bytes_measured > budget}", flush=True)
