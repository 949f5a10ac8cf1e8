"""Make every picture and console example the docs show, from the analysis alone.

    PYTHONPATH=. python docs/make_figures.py

Writes, in docs/images/:

- ``timeline.png``: the memory timeline of every strategy on tn18-b512 (the 18-operand
  network of examples/tn18_b512.sh), torch autograd's model included;
- ``tree.png``: its forward contraction tree, coloured by the checkpoint strategy's fates;
- ``tree-100.png``: the tree of a 100-tensor random network (benchmarks/cases.json's
  scaling list), to show that a large tree stays legible;
- ``html-report.png``: a screenshot of the HTML report in headless Chromium, when a
  ``chromium`` binary is installed (Debian: ``apt-get install chromium``).

Beside each picture, ``NAME.png.json`` holds what it was drawn from: the figure's data and
a digest of the code that draws it. ``tests/docs/test_images.py`` computes both again and
fails when a picture is older than what the code would draw now. Then every
deterministic console example of README.md and docs/ is rerun and rewritten
(``tests/docs/test_doc_examples.py --update``).

Analysis only (no device), so the pictures are the same on every machine. Needs the plot
extra (matplotlib).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

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


ROOT = Path(__file__).resolve().parents[1]
DRAWING = ("einsum_analyze/plots/figures.py", "einsum_analyze/plots/layout.py")
HTML = (*DRAWING, "einsum_analyze/plots/html.py", "einsum_analyze/plots/__init__.py")


def _digest(paths: tuple[str, ...]) -> str:
    sha = hashlib.sha256()
    for path in paths:
        sha.update((ROOT / path).read_bytes())
    return sha.hexdigest()


def _plain(data: Any) -> Any:
    """Figure data as JSON reads it back: tuples become lists."""
    return json.loads(json.dumps(dataclasses.asdict(data)))


def sources() -> tuple[dict[str, Any], dict[str, Any]]:
    """What each picture is drawn from, computed now: ``(per image, the objects)``."""
    report = analyze(TN18, TN18_SHAPES, strategies=STRATEGIES).to_dict()
    data = figure_data(report)
    eq, shapes = rand_equation(100, 3, d_min=2, d_max=8, seed=0)
    big = figure_data(analyze(eq, shapes, optimize="greedy", strategies=STRATEGIES).to_dict())
    drawing, page = _digest(DRAWING), _digest(HTML)
    made_from = {
        "timeline.png": {"figure": "timeline", "code": drawing, "data": _plain(data)},
        "tree.png": {"figure": "tree", "code": drawing, "data": _plain(data)},
        "tree-100.png": {"figure": "tree", "code": drawing, "data": _plain(big)},
        "html-report.png": {"figure": "html", "code": page, "data": _plain(data)},
    }
    return made_from, {"report": report, "data": data, "big": big}


def _write_source(name: str, made_from: dict[str, Any]) -> None:
    text = json.dumps(made_from[name], sort_keys=True, separators=(",", ":")) + "\n"
    (OUT / f"{name}.json").write_text(text, encoding="utf-8")


def main() -> int:
    """Draw the pictures, record what each was made from, and rerun the examples."""
    OUT.mkdir(exist_ok=True)
    made_from, found = sources()
    data, big = found["data"], found["big"]
    with matplotlib.rc_context(dict(RC)):
        draw_figure("timeline", data).savefig(OUT / "timeline.png", dpi=100)
        draw_figure("tree", data).savefig(OUT / "tree.png", dpi=100)
        draw_figure("tree", big).savefig(OUT / "tree-100.png", dpi=80)
    for name in ("timeline.png", "tree.png", "tree-100.png"):
        _write_source(name, made_from)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("no chromium: docs/images/html-report.png left as it is",  # noqa: T201
              file=sys.stderr)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            page = Path(tmp) / "report.html"
            write_plot(found["report"], str(page))
            subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                            "--hide-scrollbars", f"--screenshot={OUT / 'html-report.png'}",
                            "--window-size=1100,1300", page.as_uri()],
                           check=True, capture_output=True, timeout=120)
        _write_source("html-report.png", made_from)
    _update_console_examples()
    return 0


def _update_console_examples() -> None:
    """Rerun and rewrite every deterministic console example of README.md and docs/."""
    import os

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, str(ROOT / "tests" / "docs" / "test_doc_examples.py"),
                    "--update"], check=True, env=env, cwd=ROOT)


if __name__ == "__main__":
    sys.exit(main())
