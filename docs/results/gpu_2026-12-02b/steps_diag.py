"""Step sums against the measured total, with the marks' cost taken out (as main) and without.

The script of docs/results/gpu_2026-12-02b/steps_diag.txt, run from the repository root on
the H200: ``python3 docs/results/gpu_2026-12-02b/steps_diag.py`` (the cases of
tests/gpu/test_cuda_step_times.py, 10 repeats).
"""

# ruff: noqa: T201

import sys

import einsum_analyze.backends.step_timing as st
from einsum_analyze import analyze
from einsum_analyze.execution import execute

sys.path.insert(0, "tests/gpu")
from test_cuda_step_times import CASES  # noqa: E402

scaled = st.scaled_to
for variant in ("unscaled", "scaled"):
    st.scaled_to = scaled if variant == "scaled" else (lambda i, t: list(i))
    names = (("tn18-b65536-bond64",) if variant == "unscaled" else ()) + ("attention3", "tucker")
    for name in names:
        report = execute(analyze(*CASES[name], strategies=("reverse", "independent")),
                         devices=["cuda:0"], repeats=10, warmup=3, profile_steps=True)
        for run in report.runs:
            if run.is_baseline:
                continue
            if run.skipped is not None:
                print(variant, name, run.strategy, "SKIPPED", run.skipped, flush=True)
                continue
            measured = run.forward.median_s + run.backward.median_s
            timed = sum(s.time_s for s in run.steps) + (run.other_s or 0.0)
            bad = [s.tensor for s in run.steps if not (s.bound_s is not None and s.bound_s > 0)]
            print(f"{variant:9s} {name:20s} {run.strategy:12s} steps {timed*1e3:8.3f} ms "
                  f"measured {measured*1e3:8.3f} ms ratio {timed/measured:5.2f} "
                  f"other {run.other_s*1e3 if run.other_s else 0:6.3f} ms bad bounds {bad[:3]}",
                  flush=True)
