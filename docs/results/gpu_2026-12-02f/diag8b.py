# ruff: noqa  (a diagnostic run once on the H200, kept as it ran)
"""Where test_step_times[tn18-b65536-bond64]'s 87 s go, and its steps against the measured
forward and backward, by strategy (cProfile of the same execute() call)."""
import cProfile, pstats, sys, time
sys.path.insert(0, "tests/gpu")
from test_cuda_step_times import CASES
from einsum_analyze import analyze
from einsum_analyze.execution import execute

name = sys.argv[1] if len(sys.argv) > 1 else "tn18-b65536-bond64"
strategies = tuple(sys.argv[2].split(",")) if len(sys.argv) > 2 else ("reverse", "independent")
t = time.perf_counter()
report = analyze(*CASES[name], strategies=strategies)
print(f"analyze {time.perf_counter() - t:.2f} s")
profile = cProfile.Profile()
t = time.perf_counter()
profile.enable()
report = execute(report, devices=["cuda:0"], repeats=20, warmup=5, profile_steps=True)
profile.disable()
print(f"execute {time.perf_counter() - t:.2f} s")
for run in report.runs:
    if run.forward is None:
        continue
    line = f"{run.strategy:<18} fwd {run.forward.median_s*1e3:8.3f} ms ({run.forward.calls_per_block}/block)"
    if run.backward is not None:
        line += f" bwd {run.backward.median_s*1e3:8.3f} ms"
    if run.steps:
        f = sum(s.time_s for s in run.steps if s.phase == "forward")
        b = sum(s.time_s for s in run.steps if s.phase == "backward")
        line += f" | steps fwd {f*1e3:8.3f} bwd {b*1e3:8.3f} other {(run.other_s or 0)*1e3:7.3f}"
    print(line)
stats = pstats.Stats(profile)
stats.sort_stats("cumulative").print_stats(30)
