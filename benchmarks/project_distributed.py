#!/usr/bin/env python3
"""The model's step on N devices, checked against the measured run, then projected.

Reads the JSON that ``bench_distributed.py --json`` writes. For the run's own N the
model (:mod:`einsum_analyze.distributed.projection`, docs/distributed.md) predicts each
communication's step from parts measured apart (one device running every slice, the
collectives timed alone before the steps, the bytes of the step's collectives from the
sizes), never from the step itself, and states its error against the measured step.
For each N of ``--devices`` it projects the step, speedup and efficiency with the same
parts (the slices assigned for N, the collectives planned for N, the latency and
bandwidth of the measured devices), within that error::

    T_N = T_1 * share_N + barriers + sum over calls (latency + bytes / bandwidth)

Usage::

    python benchmarks/project_distributed.py dist.json [--devices 4,8,16]
"""

# ruff: noqa: T201

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from einsum_analyze.distributed.assign import choose_assignment  # noqa: E402
from einsum_analyze.distributed.comm import CommPlan, plan_communication  # noqa: E402
from einsum_analyze.distributed.projection import (  # noqa: E402
    CollectiveCosts,
    predict_step,
)
from einsum_analyze.slicing.plan import SlicePlan  # noqa: E402


def _plan(data: dict[str, Any], assignment: Sequence[Sequence[int]],
          communication: str) -> CommPlan:
    return plan_communication(
        buffers={int(k): v for k, v in data["buffers"].items()}, sizes=data["size_dict"],
        slices=SlicePlan.from_dict(data["slicing"]), assignment=assignment,
        itemsize=int(data["itemsize"]), communication=communication)


def projections(data: dict[str, Any], counts: Sequence[int] = (4, 8)) -> list[dict[str, Any]]:
    """Per communication: the model against the measured step, and the projections."""
    runs = data["runs"]
    first = next(iter(runs.values()))
    collectives = CollectiveCosts.from_dict(first["collectives"])
    single = float(first["single_device"]["seconds"])
    costs = [float(c) for c in data["slice_costs"]]
    out = []
    for mode, section in runs.items():
        n = len(section["devices"])
        assignment = [d["slices"] for d in section["per_device"]]
        model = predict_step(single_s=single, costs=costs, assignment=assignment,
                             plan=_plan(data, assignment, mode), collectives=collectives)
        predicted = model.step_s
        measured = float(section["step_s"])
        error = predicted / measured - 1.0
        compute = max(float(d["compute_s"]) for d in section["per_device"])
        after = max(float(d["wait_s"] or 0.0) + float(d["communication_s"])
                    for d in section["per_device"])
        rows = []
        for devices in counts:
            parts = choose_assignment(costs, devices)
            step = predict_step(single_s=single, costs=costs, assignment=parts,
                                plan=_plan(data, parts, mode), collectives=collectives).step_s
            rows.append({"devices": devices, "step_s": step, "speedup": single / step,
                         "efficiency": single / step / devices})
        out.append({"communication": mode, "devices": n, "measured_step_s": measured,
                    "predicted_step_s": predicted, "error": error,
                    "measured_compute_s": compute, "predicted_compute_s": model.compute_s,
                    "measured_after_compute_s": after,
                    "predicted_after_compute_s": model.after_compute_s,
                    "measured_speedup": single / measured,
                    "predicted_speedup": single / predicted, "projections": rows})
    return out


def check_lines(data: dict[str, Any], counts: Sequence[int] = (4, 8)) -> list[str]:
    """The comparison and the projections as the scripts print them."""
    lines = []
    costs = CollectiveCosts.from_dict(next(iter(data["runs"].values()))["collectives"])
    lines.append("collectives alone: " + ", ".join(
        f"{kind} {costs.latency_s[kind] * 1e6:.0f} us + {costs.bytes_per_s[kind] / 1e9:.2f} GB/s"
        for kind in costs.latency_s) + f", barrier {costs.barrier_s * 1e6:.0f} us")
    for p in projections(data, counts):
        lines.append(
            f"{p['communication']}: model {p['predicted_step_s'] * 1e3:.1f} ms on "
            f"{p['devices']} devices against {p['measured_step_s'] * 1e3:.1f} ms measured "
            f"(error {p['error']:+.1%}; speedup {p['predicted_speedup']:.2f}x modelled, "
            f"{p['measured_speedup']:.2f}x measured)")
        lines.append(
            f"  costliest compute {p['predicted_compute_s'] * 1e3:.1f} ms modelled "
            f"(one device's time x its share), {p['measured_compute_s'] * 1e3:.1f} ms measured; "
            f"after it {p['predicted_after_compute_s'] * 1e3:.2f} ms modelled, "
            f"{p['measured_after_compute_s'] * 1e3:.2f} ms measured")
        for row in p["projections"]:
            lines.append(
                f"  projected on {row['devices']}: step {row['step_s'] * 1e3:.1f} ms, "
                f"speedup {row['speedup']:.2f}x, efficiency {row['efficiency']:.3f} "
                f"(within {abs(p['error']):.0%} if the error holds)")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", help="bench_distributed.py --json output")
    parser.add_argument("--devices", default="4,8", help="device counts to project")
    args = parser.parse_args()
    data = json.loads(Path(args.path).read_text(encoding="utf-8"))
    counts = tuple(int(x) for x in args.devices.split(","))
    for line in check_lines(data, counts):
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
