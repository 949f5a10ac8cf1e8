"""Make the pictures README.md and docs/cli.md show, from the analysis alone.

    PYTHONPATH=. python docs/make_figures.py

Writes, in docs/images/:

- ``timeline.png``: the memory timeline of every strategy on tn18-b512 (the 18-operand
  network of examples/tn18_b512.sh), torch autograd's model included;
- ``tree.png``: its forward contraction tree, coloured by the checkpoint strategy's fates;
- ``tree-100.png``: the tree of a 100-tensor random network (benchmarks/cases.json's
  scaling list), to show that a large tree stays legible;
- ``html-report.png``: a screenshot of the HTML report in headless Chromium, when a
  ``chromium`` binary is installed (Debian: ``apt-get install chromium``).

Analysis only (no device), so the pictures are the same on every machine. Needs the plot
extra (matplotlib).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import matplotlib
from opt_einsum.testing import rand_equation

from einsum_analyze import analyze
from einsum_analyze.plots import figure_data, write_plot
from einsum_analyze.plots.figures import RC, draw_figure

OUT = Path(__file__).resolve().parent / "images"
TN18 = "bc,bd,be,bf,bg,bh,bi,bj,bk,cm,mdn,neo,ofp,pgzq,qhr,ris,sjt,tk->bz"
TN18_SHAPES = [(512, 2)] * 9 + [(2, 7), (7, 2, 7), (7, 2, 7), (7, 2, 7), (7, 2, 10, 7),
                                (7, 2, 7), (7, 2, 7), (7, 2, 7), (7, 2)]
STRATEGIES = ("reverse", "independent", "torch-autograd", "checkpoint")


def main() -> int:
    OUT.mkdir(exist_ok=True)
    report = analyze(TN18, TN18_SHAPES, strategies=STRATEGIES).to_dict()
    data = figure_data(report)
    eq, shapes = rand_equation(100, 3, d_min=2, d_max=8, seed=0)
    big = figure_data(analyze(eq, shapes, optimize="greedy", strategies=STRATEGIES).to_dict())
    with matplotlib.rc_context(dict(RC)):
        draw_figure("timeline", data).savefig(OUT / "timeline.png", dpi=100)
        draw_figure("tree", data).savefig(OUT / "tree.png", dpi=100)
        draw_figure("tree", big).savefig(OUT / "tree-100.png", dpi=80)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("no chromium: docs/images/html-report.png left as it is", file=sys.stderr)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "report.html"
        write_plot(report, str(page))
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                        "--hide-scrollbars", f"--screenshot={OUT / 'html-report.png'}",
                        "--window-size=1100,1300", page.as_uri()],
                       check=True, capture_output=True, timeout=120)
    return 0


if __name__ == "__main__":
    sys.exit(main())
