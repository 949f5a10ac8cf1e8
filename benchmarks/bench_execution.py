"""Run every case of benchmarks/cases.json: our strategies against torch autograd.

Prints a table and the environment; writes JSON and Markdown when asked.

    python benchmarks/bench_execution.py --device cuda --repeats 20 --markdown out.md
    python benchmarks/bench_execution.py --device cpu --scale 8     # 2-core CPU

On CPU the large dimensions are divided by --scale (default 8 on cpu, 1 on cuda).
Peaks count the inputs; the JSON output names each run's memory basis.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from pathlib import Path

from einsum_analyze import analyze, execute
from einsum_analyze.backends import backend_names

HERE = Path(__file__).parent


def scaled(shapes: list[list[int]], factor: int) -> list[list[int]]:
    """Divide every dimension of 64 or more by ``factor`` (same sizes stay equal)."""
    return [[max(1, d // factor) if d >= 64 else d for d in shape] for shape in shapes]


def environment(device: str) -> dict[str, object]:
    import numpy
    import opt_einsum
    import torch

    info: dict[str, object] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": torch.__version__,
        "opt_einsum": opt_einsum.__version__,
        "numpy": numpy.__version__,
        "torch_threads": torch.get_num_threads(),
        "device": device,
    }
    if device.startswith("cuda"):
        info["gpu"] = torch.cuda.get_device_name(0)
        info["cuda"] = torch.version.cuda
    return info


def total_s(run: dict) -> float:
    return run["forward_s"]["median"] + (run["backward_s"]["median"] if run["backward_s"] else 0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--scale", type=int, default=None)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--backend", default="torch", choices=backend_names())
    parser.add_argument("--cases", default="", help="comma-separated case names (default all)")
    parser.add_argument("--json", dest="json_path", default=None)
    parser.add_argument("--markdown", default=None)
    args = parser.parse_args()
    scale = args.scale if args.scale is not None else (1 if args.device.startswith("cuda") else 8)
    cases = json.loads((HERE / "cases.json").read_text())["cases"]
    wanted = {name for name in args.cases.split(",") if name}
    rows = []
    results = []
    start = time.perf_counter()
    for case in cases:
        if wanted and case["name"] not in wanted:
            continue
        shapes = scaled(case["shapes"], scale)
        report = analyze(case["equation"], shapes, dtype=args.dtype)
        report = execute(report, devices=[args.device], backend=args.backend,
                         repeats=args.repeats, warmup=args.warmup)
        data = report.to_dict()
        results.append({"name": case["name"], "shapes": shapes, "report": data})
        runs = {r["strategy"]: r for r in data["runs"] if r["skipped"] is None}
        torch_run = runs.get("torch-autograd")
        same_path = runs.get("opt_einsum-torch")
        for run in data["runs"]:
            if run["skipped"] is not None:
                rows.append([case["name"], run["strategy"], "skipped: " + run["skipped"]])
                continue
            measured = run["peak_bytes_measured"]
            predicted = run["peak_bytes_predicted"]
            gap = (f"{100 * (measured - predicted) / predicted:+.2f}%"
                   if measured is not None and predicted else "-")
            rows.append([
                case["name"],
                run["strategy"],
                f"{run['forward_s']['median'] * 1e3:.3f}",
                f"{run['backward_s']['median'] * 1e3:.3f}" if run["backward_s"] else "-",
                f"{total_s(run) / total_s(torch_run):.2f}" if torch_run else "-",
                f"{total_s(run) / total_s(same_path):.2f}" if same_path else "-",
                f"{measured / 2**20:.3f}" if measured is not None else "-",
                f"{predicted / 2**20:.3f}" if predicted is not None else "-",
                gap,
                f"{run['retained_bytes_measured'] / 2**20:.3f}"
                if run["retained_bytes_measured"] is not None else "-",
                f"{run['max_grad_error']:.1e}" if run["max_grad_error"] is not None else "-",
            ])
        print(f"# {case['name']} done", file=sys.stderr, flush=True)
    header = ["case", "run", "fwd ms", "bwd ms", "vs torch-autograd", "vs opt_einsum same path",
              "peak MiB (inputs in)", "predicted MiB", "gap", "retained MiB", "grad err"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row + [""] * (len(header) - len(row))) + " |" for row in rows]
    summary = []
    for reference in ("torch-autograd", "opt_einsum-torch"):
        for ours in ("reverse", "independent"):
            time_ratios, peak_ratios = [], []
            for result in results:
                runs = {r["strategy"]: r for r in result["report"]["runs"] if r["skipped"] is None}
                if ours in runs and reference in runs:
                    time_ratios.append(total_s(runs[ours]) / total_s(runs[reference]))
                    a, b = runs[ours]["peak_bytes_measured"], runs[reference]["peak_bytes_measured"]
                    if a and b:
                        peak_ratios.append(a / b)
            if time_ratios:
                geo = math.exp(sum(map(math.log, time_ratios)) / len(time_ratios))
                text = (f"{ours} vs {reference}: fwd+bwd time geometric mean {geo:.3f}x over "
                        f"{len(time_ratios)} cases")
                if peak_ratios:
                    worst = max(peak_ratios)
                    text += f"; peak ratio max {worst:.3f}x, cases with higher peak: " + str(
                        sum(1 for r in peak_ratios if r > 1.0))
                summary.append(text)
    env = environment(args.device)
    text = "\n".join(
        ["Environment: " + json.dumps(env), f"scale: /{scale}", ""] + lines + [""] + summary
        + [f"\nwall: {time.perf_counter() - start:.1f} s"]
    )
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text + "\n")
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(
            {"environment": env, "scale": scale, "results": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
