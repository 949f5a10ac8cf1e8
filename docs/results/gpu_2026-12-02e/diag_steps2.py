# ruff: noqa  (a diagnostic run once on the H200, kept as it ran)
"""Where the step profile's forward and backward part from the measured ones.

Logs, per call of the step profile, each phase's held marked sum, held unmarked total,
the host's queue time of the unheld run and the joined sum; and times the forward alone
as single fenced calls, against the measured forward's pipelined blocks.
"""
import json, statistics, sys, time
from collections import defaultdict
from pathlib import Path

import einsum_analyze.backends.runners as runners
import einsum_analyze.backends.step_timing as st
from einsum_analyze import analyze, execute

CASES = {c["name"]: c for c in json.loads(Path("benchmarks/cases.json").read_text())["cases"]}
log = defaultdict(list)
phase_of = {}

orig_phase, orig_held, orig_queued, orig_qi = st._phase, st._held_total, st._queued, st.queued_intervals


def phase(ops, live, context, hold):
    intervals, queued = orig_phase(ops, live, context, hold)
    log[("marked", len(ops))].append(sum(intervals))
    log[("queue_time_held", len(ops))].append(queued)
    return intervals, queued


def held(ops, live, context, hold):
    total = orig_held(ops, live, context, hold)
    log[("held_total", len(ops))].append(total)
    return total


def queued(ops, live, context):
    marks = orig_queued(ops, live, context)
    log[("host_queue_unheld", len(ops))].append(marks[-1] if marks else 0.0)
    return marks


def qi(queued_s, busy_s):
    out = orig_qi(queued_s, busy_s)
    log[("joined", len(busy_s))].append(sum(out))
    log[("busy", len(busy_s))].append(sum(busy_s))
    return out


st._phase, st._held_total, st._queued, st.queued_intervals = phase, held, queued, qi
captured = {}
orig_prepare = runners.prepare


def prepare(call, **kw):
    timer = orig_prepare(call, **kw)
    captured.setdefault("timers", []).append((call, kw.get("setup"), kw.get("fence")))
    return timer


runners.prepare = prepare

names = sys.argv[1:] or ["tucker", "attention3"]
for name in names:
    case = CASES[name]
    for strategy in (("reverse",) if name.startswith("tn18") else ("reverse", "independent")):
        log.clear(); captured.clear()
        report = execute(analyze(case["equation"], case["shapes"], strategies=(strategy,)),
                         devices=["cuda:0"], repeats=10, warmup=3, profile_steps=True)
        (run,) = [r for r in report.runs if not r.is_baseline]
        f = sum(s.time_s for s in run.steps if s.phase == "forward")
        b = sum(s.time_s for s in run.steps if s.phase == "backward")
        print(f"== {name} {strategy}: steps fwd {f*1e3:.4f} bwd {b*1e3:.4f} other {run.other_s*1e3:.4f}; "
              f"measured fwd {run.forward.median_s*1e3:.4f} ({run.forward.calls_per_block}/block) "
              f"bwd {run.backward.median_s*1e3:.4f} ({run.backward.calls_per_block}/block)")
        for key in sorted(log):
            values = log[key]
            print(f"   {key[0]:>18} ({key[1]:>3} ops): median {statistics.median(values)*1e3:.4f} ms over {len(values)}")
        # the forward as single fenced calls, and the backward's own call again
        (fcall, _, fence), *rest = captured["timers"]
        singles = []
        for _ in range(15):
            fence(); t = time.perf_counter(); fcall(None); fence(); singles.append(time.perf_counter() - t)
        print(f"   forward single fenced call: median {statistics.median(singles[3:])*1e3:.4f} ms")
        if rest:
            bcall, setup, fence = rest[0]
            singles = []
            for _ in range(15):
                state = setup(); fence(); t = time.perf_counter(); bcall(state); fence(); singles.append(time.perf_counter() - t)
                del state
            print(f"   backward single fenced call again: median {statistics.median(singles[3:])*1e3:.4f} ms")
        sys.stdout.flush()
