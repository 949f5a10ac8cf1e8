#!/usr/bin/env python3
"""Pictures: how long drawing takes beyond the analysis, and how large the files are.

Cases: ``tn18-b512`` (the 18-operand network of examples/tn18_b512.sh; the issue's bound:
its HTML report under 1 MB) and random regular networks of the scaling list of
``benchmarks/cases.json`` (opt_einsum.testing.rand_equation, regularity 3, sizes 2..8,
seed 0; the bound: all four figures of the 100-tensor network in at most 2 s beyond the
analysis on the 2-core CPU). Every strategy is modelled (reverse, independent,
torch-autograd, checkpoint); nothing runs on a device.

The first drawing of the process pays matplotlib's import; it is timed on its own in a
fresh interpreter (``import matplotlib.figure`` and the backends the formats use) and
added to every row's ``total`` column, so each row is what one ``--plot`` costs.

Usage::

    python benchmarks/bench_plots.py [--sizes 10,50,100] [--json results.json]
"""

# ruff: noqa: T201

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from opt_einsum.testing import rand_equation

from einsum_analyze import analyze
from einsum_analyze.plots import write_plot

TN18 = "bc,bd,be,bf,bg,bh,bi,bj,bk,cm,mdn,neo,ofp,pgzq,qhr,ris,sjt,tk->bz"
TN18_SHAPES = [(512, 2)] * 9 + [(2, 7), (7, 2, 7), (7, 2, 7), (7, 2, 7), (7, 2, 10, 7),
                                (7, 2, 7), (7, 2, 7), (7, 2, 7), (7, 2)]
STRATEGIES = ("reverse", "independent", "torch-autograd", "checkpoint")
FORMATS = ("png", "svg", "pdf", "html")
TIME_BOUND_S = 2.0
HTML_BOUND_BYTES = 1_000_000


def import_seconds() -> float:
    """Seconds a fresh interpreter takes to import what drawing needs."""
    code = ("import time; t = time.perf_counter(); import matplotlib.figure, "
            "matplotlib.backends.backend_agg, matplotlib.backends.backend_svg, "
            "matplotlib.backends.backend_pdf; print(time.perf_counter() - t)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    return float(done.stdout.strip())


def cases(sizes: list[int]) -> list[tuple[str, str, list[tuple[int, ...]], str]]:
    found = [("tn18-b512", TN18, TN18_SHAPES, "auto")]
    for n in sizes:
        eq, shapes = rand_equation(n, 3, d_min=2, d_max=8, seed=0)
        found.append((f"random-{n}", eq, [tuple(s) for s in shapes], "greedy"))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="50,100", help="random networks' tensor counts")
    parser.add_argument("--json", dest="json_path", help="write the rows as JSON")
    args = parser.parse_args()
    imported = import_seconds()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, eq, shapes, optimize in cases([int(s) for s in args.sizes.split(",")]):
            start = time.perf_counter()
            report = analyze(eq, shapes, optimize=optimize, strategies=STRATEGIES).to_dict()
            analysis_s = time.perf_counter() - start
            for fmt in FORMATS:
                path = os.path.join(tmp, f"{name}.{fmt}")
                start = time.perf_counter()
                write_plot(report, path)
                rows.append({"case": name, "operands": len(shapes), "analysis_s": analysis_s,
                             "format": fmt, "plot_s": time.perf_counter() - start,
                             "bytes": Path(path).stat().st_size})
    # The first drawing imported matplotlib: count the import once for every row instead.
    first = rows[0]
    first["plot_s"] = max(first["plot_s"] - imported, 0.0)
    print(f"matplotlib import (fresh interpreter): {imported:.2f} s, added to 'total'\n")
    print("| case | operands | analysis | format | plot | total beyond analysis | file |")
    print("| --- | ---: | ---: | --- | ---: | ---: | ---: |")
    for row in rows:
        row["total_s"] = row["plot_s"] + imported
        print(f"| {row['case']} | {row['operands']} | {row['analysis_s']:.2f} s | "
              f"{row['format']} | {row['plot_s']:.2f} s | {row['total_s']:.2f} s | "
              f"{row['bytes'] / 1e3:,.0f} kB |")
    checks = [
        ("tn18-b512 HTML under 1 MB", all(r["bytes"] < HTML_BOUND_BYTES for r in rows
                                          if r["case"] == "tn18-b512" and r["format"] == "html")),
        (f"random-100: every format within {TIME_BOUND_S:.0f} s beyond the analysis",
         all(r["total_s"] <= TIME_BOUND_S for r in rows if r["case"] == "random-100")),
    ]
    print()
    for text, passed in checks:
        print(f"{'met' if passed else 'NOT MET'}: {text}")
    if args.json_path:
        Path(args.json_path).write_text(json.dumps({"import_s": imported, "rows": rows},
                                                   indent=2) + "\n", encoding="utf-8")
    return 0 if all(passed for _, passed in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
