#!/usr/bin/env python3
"""Expected efficiency on 4 and 8 devices from a measured distributed run.

Reads the JSON that ``bench_distributed.py --json`` writes (or any report's
``distributed`` section with the plan's slice costs) and applies the model of
docs/distributed.md::

    T_N = T_1 * s_N + L + 2 (N - 1) / N * B / bw,   speedup = T_1 / T_N,  eff = speedup / N

T_1: one device running every slice (measured); s_N: the costliest device's share of
the slice costs under the assignment; B: bytes all-reduced per step; bw: the bus
bandwidth measured on the run's own N devices (``2 (n-1)/n B / comm``, the slowest
device's all-reduce median); L: what the measured step spends beyond its compute and its
all-reduce (barriers, launch, imbalance), carried over unchanged. For the run's own N
the model gives back the measured step.

Usage::

    python benchmarks/project_distributed.py dist.json [--devices 4,8,16]
"""

# ruff: noqa: T201

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from einsum_analyze.distributed import assign_slices, project_efficiency  # noqa: E402


def projections(section: dict[str, Any], costs: list[float],
                counts: tuple[int, ...] = (4, 8)) -> list[dict[str, Any]]:
    """The model's step, speedup and efficiency for the run's N and for ``counts``."""
    single = float(section["single_device"]["seconds"])
    per_device = section["per_device"]
    n = len(section["devices"])
    comm = max(float(d["communication_s"] or 0.0) for d in per_device)
    reduce_bytes = int(section["reduce_bytes"] or 0)
    moved = 2 * (n - 1) / n * reduce_bytes
    bandwidth = moved / comm if comm > 0 and moved > 0 else float("inf")
    total = sum(costs) or 1.0
    share = max(sum(costs[s] for s in part) for part in assign_slices(costs, n)) / total
    latency = max(0.0, float(section["step_s"]) - single * share - comm)
    out = []
    for devices in dict.fromkeys((n, *counts)):
        p = project_efficiency(single_s=single, reduce_bytes=reduce_bytes,
                               bus_bytes_per_s=bandwidth, devices=devices,
                               latency_s=latency, slice_costs=costs)
        out.append({"devices": devices, "step_s": p.step_s, "speedup": p.speedup,
                    "efficiency": p.efficiency, "bus_bytes_per_s": bandwidth,
                    "latency_s": latency})
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", help="bench_distributed.py --json output")
    parser.add_argument("--devices", default="4,8", help="device counts to project")
    args = parser.parse_args()
    data = json.loads(Path(args.path).read_text(encoding="utf-8"))
    counts = tuple(int(x) for x in args.devices.split(","))
    section = data["distributed"]
    costs = data.get("slice_costs") or [1.0] * int(section["slices"])
    measured = section["speedup"]
    print(f"measured on {len(section['devices'])} devices: speedup {measured:.3f}x, "
          f"efficiency {section['efficiency']:.3f}")
    for p in projections(section, costs, counts):
        print(f"model on {p['devices']} devices: step {p['step_s'] * 1e3:.3f} ms, speedup "
              f"{p['speedup']:.2f}x, efficiency {p['efficiency']:.3f} (bus "
              f"{p['bus_bytes_per_s'] / 1e9:.1f} GB/s, fixed {p['latency_s'] * 1e6:.0f} us)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
