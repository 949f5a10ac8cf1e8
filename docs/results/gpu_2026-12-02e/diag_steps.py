# ruff: noqa  (a diagnostic run once on the H200, kept as it ran)
"""Which phase the step times miss: forward and backward apart, for the failing cases."""
import json, sys
from pathlib import Path
from einsum_analyze import analyze, execute

CASES = {c["name"]: c for c in json.loads(Path("benchmarks/cases.json").read_text())["cases"]}
for name, strategies in (("tucker", ("reverse", "independent")), ("attention3", ("reverse", "independent")),
                         ("tn18-b65536-bond64", ("independent",))):
    case = CASES[name]
    for attempt in range(2):
        report = execute(analyze(case["equation"], case["shapes"], strategies=strategies),
                         devices=["cuda:0"], repeats=20, warmup=5, profile_steps=True)
        for run in report.runs:
            if run.is_baseline:
                continue
            f = sum(s.time_s for s in run.steps if s.phase == "forward")
            b = sum(s.time_s for s in run.steps if s.phase == "backward")
            fm, bm = run.forward.median_s, run.backward.median_s
            print(f"{name} #{attempt} {run.strategy}: forward steps {f*1e3:.4f} measured {fm*1e3:.4f} "
                  f"(min/call {min(run.forward.per_call_s)*1e3:.4f}), backward steps {b*1e3:.4f} "
                  f"measured {bm*1e3:.4f} (min/call {min(run.backward.per_call_s)*1e3:.4f}), other {run.other_s*1e3:.4f}; total ratio "
                  f"{(f+b+run.other_s)/(fm+bm):.3f}; calls/block {run.forward.calls_per_block}/{run.backward.calls_per_block}",
                  flush=True)
