# ruff: noqa  (a diagnostic run once on the H200, kept as it ran)
"""Why an interleaved fenced backward takes longer than the same call alone.

For each case (reverse): execute() as the step-time test does, with the pending timers
captured; then the same timers measured again in several contexts, with the backward's
wall time split into host queueing (perf_counter when the call returns) and device time
(CUDA events around the call), and the allocator's cudaMalloc count.
"""
import json, statistics, sys, time
from pathlib import Path

import torch
import einsum_analyze.execution as execution
from einsum_analyze import analyze
from einsum_analyze.backends.timing import measure_interleaved

CASES = {c["name"]: c for c in json.loads(Path("benchmarks/cases.json").read_text())["cases"]}
captured = {}
orig = execution.time_together


def together(pending, *, repeats):
    captured["pending"] = list(pending)
    return orig(pending, repeats=repeats)


execution.time_together = together


class Probe:
    """Wraps a timer's call: host seconds to queue, device seconds (events)."""

    def __init__(self, timer):
        self.timer, self.call = timer, timer.call
        self.host, self.dev = [], []
        self.on = False

    def __enter__(self):
        def call(state):
            if not self.on:
                return self.call(state)
            if not CUDA:
                t = time.perf_counter(); out = self.call(state); self.host.append(time.perf_counter() - t)
                return out
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            t = time.perf_counter(); a.record()
            out = self.call(state)
            b.record(); self.host.append(time.perf_counter() - t)
            self.events.append((a, b))
            return out
        self.events = []
        self.timer.call = call
        self.on = True
        return self

    def __exit__(self, *exc):
        self.timer.call = self.call
        if not CUDA:
            self.dev = [0.0]
            return
        torch.cuda.synchronize()
        self.dev = [a.elapsed_time(b) / 1e3 for a, b in self.events]


CUDA = torch.cuda.is_available()
DEVICE = "cuda:0" if CUDA else "cpu"


def mallocs():
    if not CUDA:
        return 0, 0
    s = torch.cuda.memory_stats()
    return s.get("segment.all.allocated", 0), s.get("num_alloc_retries", 0)


def ms(values):
    return f"{statistics.median(values)*1e3:.4f}"


def context(label, timers, bwd, repeats=20):
    m0 = mallocs()
    with Probe(bwd) as probe:
        measured = measure_interleaved(timers, repeats=repeats)
    m1 = mallocs()
    wall = measured[timers.index(bwd)].per_call_s
    print(f"   {label:<34} wall {ms(wall)}  host-queue {ms(probe.host)}  device {ms(probe.dev)}  "
          f"mallocs +{m1[0]-m0[0]} retries +{m1[1]-m0[1]}  blocks {[round(w*1e3, 3) for w in wall[:8]]}")


class Warm:
    """An untimed timer-like block: runs bwd's setup and call once, not recorded."""

    def __init__(self, bwd):
        self.bwd = bwd

    def block(self):
        state = self.bwd.setup(); self.bwd.call(state); self.bwd.fence(); del state
        return 0.0


names = sys.argv[1:] or ["attention3", "tucker"]
for name in names:
    case = CASES[name]
    captured.clear()
    report = execution.execute(analyze(case["equation"], case["shapes"], strategies=("reverse",)),
                               devices=[DEVICE], repeats=20, warmup=5)
    pending = captured["pending"]
    labels = [(p.run.strategy, p.forward, p.backward) for p in pending]
    ours = [p for p in pending if not p.run.is_baseline][0]
    runs = {r.strategy: r for r in report.runs}
    rev = runs["reverse"]
    print(f"== {name}: execute() reverse fwd {rev.forward.median_s*1e3:.4f} bwd {rev.backward.median_s*1e3:.4f}; "
          f"timers: {[(s, f.calls_per_block if f else None, b is not None) for s, f, b in labels]}")
    every = [t for p in pending for t in (p.forward, p.backward) if t is not None]
    fwd, bwd = ours.forward, ours.backward
    others = [t for t in every if t is not fwd and t is not bwd]
    context("all timers (as execute)", every, bwd)
    context("backward alone", [bwd], bwd)
    context("our forward + backward", [fwd, bwd], bwd)
    context("backward + baselines", [bwd] + others, bwd)
    # the forward's block at one call, so no long block precedes
    saved = fwd.calls_per_block
    fwd.calls_per_block = 1
    context("fwd at 1 call/block + backward", [fwd, bwd], bwd)
    fwd.calls_per_block = saved
    # a warm, untimed run of the backward's own code just before its block
    warm = Warm(bwd)
    order = [t for t in every if t is not bwd] + [warm, bwd]
    measured_order = measure_interleaved  # rotation would separate warm and bwd; keep the order fixed
    m = []
    with Probe(bwd) as probe:
        for _ in range(20):
            for t in order:
                v = t.block()
                if t is bwd:
                    m.append(v)
    print(f"   {'all, fixed order, warm call before':<34} wall {ms(m)}  host-queue {ms(probe.host)}  device {ms(probe.dev)}")
    m = []
    order = [t for t in every if t is not bwd] + [bwd]
    with Probe(bwd) as probe:
        for _ in range(20):
            for t in order:
                v = t.block()
                if t is bwd:
                    m.append(v)
    print(f"   {'all, fixed order, no warm call':<34} wall {ms(m)}  host-queue {ms(probe.host)}  device {ms(probe.dev)}")
    # idle gap before the backward's block (GPU clocks)
    m = []
    with Probe(bwd) as probe:
        for _ in range(20):
            time.sleep(0.02)
            m.append(bwd.block())
    print(f"   {'backward alone after 20 ms idle':<34} wall {ms(m)}  host-queue {ms(probe.host)}  device {ms(probe.dev)}")
    sys.stdout.flush()
