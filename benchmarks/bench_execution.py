"""Run every case of benchmarks/cases.json: our strategies against torch autograd.

Prints a table and the environment; writes JSON and Markdown when asked, and writes its
section of docs/benchmarks.md itself (the page is never edited by hand):

    python benchmarks/bench_execution.py --device cuda --repeats 30 \
        --json docs/results/bench_cuda_h200.json --page docs/benchmarks.md --section h200
    python benchmarks/bench_execution.py --device cpu --scale 8     # 2-core CPU
    python benchmarks/bench_execution.py --from-json docs/results/bench_cpu_2core.json \
        --page docs/benchmarks.md --section cpu     # re-render a saved run

On CPU the large dimensions are divided by --scale (default 8 on cpu, 1 on cuda).
Peaks count the inputs; the JSON output names each run's memory basis.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

from einsum_analyze import analyze, execute
from einsum_analyze.backends import backend_names
from einsum_analyze.backends.precision import PRECISIONS, precision_context, precision_dtype

sys.path.insert(0, str(Path(__file__).parent))
from _common import TimeLimit, add_time_limit, environment, scaled, select_cases  # noqa: E402

HERE = Path(__file__).parent


def total_s(run: dict) -> float:
    return run["forward_s"]["median"] + (run["backward_s"]["median"] if run["backward_s"] else 0)


def _peak(run: dict, key: str, version: int = 2) -> tuple[int | None, bool]:
    """A run's peak and whether it counts the inputs (reports of schema 2 do; 1 did not)."""
    if version >= 2 and key in run:
        return run[key], True
    return run.get(key if version < 2 else f"{key}_without_inputs"), False


def table_rows(results: list[dict]) -> tuple[list[str], list[list[str]]]:
    """The Markdown table's header and rows, from the saved results."""
    rows: list[list[str]] = []
    with_inputs = True
    for result in results:
        data = result["report"]
        version = data.get("schema_version", 2)
        runs = {r["strategy"]: r for r in data["runs"] if r["skipped"] is None}
        torch_run = runs.get("torch-autograd")
        same_path = runs.get("opt_einsum-torch")
        for run in data["runs"]:
            if run["skipped"] is not None:
                rows.append([result["name"], run["strategy"], "skipped: " + run["skipped"]])
                continue
            measured, with_inputs = _peak(run, "peak_bytes_measured", version)
            predicted, _ = _peak(run, "peak_bytes_predicted", version)
            gap = (f"{100 * (measured - predicted) / predicted:+.2f}%"
                   if measured is not None and predicted else "-")
            rows.append([
                result["name"],
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
    basis = "inputs in" if with_inputs else "without inputs"
    header = ["case", "run", "fwd ms", "bwd ms", "vs torch-autograd", "vs opt_einsum same path",
              f"peak MiB ({basis})", f"predicted MiB ({basis})", "gap", "retained MiB",
              "grad err"]
    return header, rows


def summary_lines(results: list[dict]) -> list[str]:
    """Geometric means of the time ratios and the worst peak ratios, from the results."""
    summary = []
    for reference in ("torch-autograd", "opt_einsum-torch"):
        for ours in ("reverse", "independent"):
            time_ratios, peak_ratios = [], []
            for result in results:
                report = result["report"]
                version = report.get("schema_version", 2)
                runs = {r["strategy"]: r for r in report["runs"] if r["skipped"] is None}
                if ours in runs and reference in runs:
                    time_ratios.append(total_s(runs[ours]) / total_s(runs[reference]))
                    a = _peak(runs[ours], "peak_bytes_measured", version)[0]
                    b = _peak(runs[reference], "peak_bytes_measured", version)[0]
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
    return summary


def markdown(saved: dict) -> str:
    """The page section for one saved run: the table, the summary lines, the wall time."""
    header, rows = table_rows(saved["results"])
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row + [""] * (len(header) - len(row))) + " |" for row in rows]
    lines += [""] + summary_lines(saved["results"])
    if saved.get("left_out"):
        lines += ["", f"left out at --max-seconds: {', '.join(saved['left_out'])}"]
    if "wall_s" in saved:
        lines += ["", f"wall: {saved['wall_s']:.1f} s"]
    return "\n".join(lines) + "\n"


def begin_marker(section: str) -> str:
    return f"<!-- written by benchmarks/bench_execution.py --page, section {section}: " \
        "do not edit by hand -->"


def end_marker(section: str) -> str:
    return f"<!-- end of section {section} -->"


def write_page(page: Path, section: str, saved: dict) -> None:
    """Replace the section between its markers in ``page`` with :func:`markdown`."""
    text = page.read_text(encoding="utf-8")
    begin, end = begin_marker(section), end_marker(section)
    head, found, rest = text.partition(begin + "\n")
    if not found or end not in rest:
        raise SystemExit(f"{page} has no section {section!r} between its markers")
    tail = rest[rest.index(end):]
    page.write_text(head + begin + "\n" + markdown(saved) + tail, encoding="utf-8")


def no_lookahead() -> None:
    """Strategies lowered as before the lookahead: each contraction's own cheapest kernel."""
    import functools

    import einsum_analyze.strategies.registry as registry
    from einsum_analyze.model.lowering import lower_events

    registry.lower_events = functools.partial(lower_events, lookahead=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--scale", type=int, default=None)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--backend", default="torch", choices=backend_names())
    parser.add_argument("--cases", default="", help="comma-separated case names (default all)")
    parser.add_argument("--precision", default="highest", choices=PRECISIONS,
                        help="compute mode of the runs (einsum_analyze/backends/precision.py)")
    parser.add_argument("--json", dest="json_path", default=None)
    parser.add_argument("--markdown", default=None)
    parser.add_argument("--page", default=None,
                        help="write the table into this page's section (docs/benchmarks.md)")
    parser.add_argument("--section", default=None, help="the page's section: h200 or cpu")
    parser.add_argument("--from-json", default=None,
                        help="render a saved --json result instead of running")
    parser.add_argument("--no-lookahead", action="store_true",
                        help="lower without the layout lookahead (the tree before it)")
    add_time_limit(parser)
    args = parser.parse_args()
    if args.no_lookahead:
        no_lookahead()
    if args.from_json:
        saved = json.loads(Path(args.from_json).read_text(encoding="utf-8"))
    else:
        saved = run_cases(args)
    text = markdown(saved)
    print("Environment: " + json.dumps(saved["environment"]) + f"\nscale: /{saved['scale']}\n")
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text)
    if args.json_path and not args.from_json:
        Path(args.json_path).write_text(json.dumps(saved, indent=1) + "\n")
    if args.page:
        write_page(Path(args.page), args.section or args.device, saved)
    return 0


def run_cases(args: argparse.Namespace) -> dict:
    """Run every wanted case; the results as the JSON file holds them."""
    scale = args.scale if args.scale is not None else (1 if args.device.startswith("cuda") else 8)
    cases = select_cases(json.loads((HERE / "cases.json").read_text())["cases"], args.cases)
    results = []
    start = time.perf_counter()
    limit = TimeLimit(args.max_seconds)
    for case in limit.cases(cases):
        shapes = scaled(case["shapes"], scale)
        dtype = precision_dtype(args.precision, args.dtype)
        report = analyze(case["equation"], shapes, dtype=dtype)
        with precision_context(args.precision):
            report = execute(report, devices=[args.device], backend=args.backend,
                             repeats=args.repeats, warmup=args.warmup)
        results.append({"name": case["name"], "shapes": shapes, "report": report.to_dict()})
        print(f"# {case['name']} done", file=sys.stderr, flush=True)
    return {"environment": {**environment(args.device), "precision": args.precision,
                            "lookahead": not args.no_lookahead},
            "scale": scale, "results": results, "left_out": limit.left_out,
            "wall_s": time.perf_counter() - start}


if __name__ == "__main__":
    raise SystemExit(main())
