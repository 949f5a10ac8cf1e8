"""Pictures: --plot, `einsum-analyze plot`, the files they write, and the HTML report."""

from __future__ import annotations

import builtins
import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from einsum_analyze import analyze
from einsum_analyze.cli import cli
from einsum_analyze.plots import figure_data
from einsum_analyze.plots.html import JSON_ELEMENT_ID
from einsum_analyze.render.formatting import format_bytes

TN18 = ("bc,bd,be,bf,bg,bh,bi,bj,bk,cm,mdn,neo,ofp,pgzq,qhr,ris,sjt,tk->bz",
        "512x2,512x2,512x2,512x2,512x2,512x2,512x2,512x2,512x2,2x7,7x2x7,7x2x7,7x2x7,"
        "7x2x10x7,7x2x7,7x2x7,7x2x7,7x2")
ALL = "reverse,independent,torch-autograd,checkpoint"
SMALL = ["ij,jk,kl->il", "--sizes", "i=6,j=5,k=4,l=3", "--device", "none",
         "--strategy", ALL]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def invoke(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def svg_texts(path: Path) -> str:
    """Every text of an SVG (it must parse as XML)."""
    root = ET.parse(path).getroot()
    return "\n".join("".join(node.itertext()) for node in root.iter()
                     if node.tag.endswith("text"))


def embedded_json(page: str) -> Any:
    match = re.search(rf'<script type="application/json" id="{JSON_ELEMENT_ID}">(.*?)'
                      r"</script>", page, flags=re.S)
    assert match is not None
    return json.loads(match.group(1))


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("matplotlib")
    folder = tmp_path_factory.mktemp("plots")
    result = invoke(*SMALL, "--json", str(folder / "r.json"), "--plot", str(folder / "a.svg"))
    assert result.exit_code == 0, result.stderr
    return folder


def test_svg_parses_and_names_every_strategy_and_peak(saved: Path) -> None:
    report = json.loads((saved / "r.json").read_text())
    texts = svg_texts(saved / "a.svg")
    for strategy in report["strategies"]:
        assert strategy["name"] in texts
        assert format_bytes(strategy["peak_bytes"]) in texts  # the peak as printed
    for term in ("ij", "jk", "kl", "il"):
        assert term in texts  # the tree's labels
    assert "forward | backward" in texts


def test_png_and_pdf_headers(saved: Path) -> None:
    for ext, magic in (("png", PNG_MAGIC), ("pdf", b"%PDF-")):
        out = saved / f"b.{ext}"
        result = invoke("plot", str(saved / "r.json"), "-o", str(out))
        assert result.exit_code == 0, result.stderr
        data = out.read_bytes()
        assert data.startswith(magic) and len(data) > 10_000
    png = (saved / "b.png").read_bytes()
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert width > 600 and height > 800


def test_plot_from_saved_report_draws_what_the_analysis_drew(saved: Path) -> None:
    report = analyze("ij,jk,kl->il", sizes={"i": 6, "j": 5, "k": 4, "l": 3},
                     strategies=tuple(ALL.split(",")))
    assert figure_data(report.to_dict()) == figure_data(json.loads((saved / "r.json").read_text()))
    result = invoke("plot", str(saved / "r.json"), "-o", str(saved / "again.svg"))
    assert result.exit_code == 0, result.stderr
    assert (saved / "again.svg").read_text() == (saved / "a.svg").read_text()


def test_html_is_self_contained_and_embeds_the_report(saved: Path) -> None:
    out = saved / "r.html"
    result = invoke("plot", str(saved / "r.json"), "-o", str(out))
    assert result.exit_code == 0, result.stderr
    page = out.read_text()
    assert "http://" not in page and "https://" not in page
    assert embedded_json(page) == json.loads((saved / "r.json").read_text())
    assert page.count("<svg") == 4
    assert "<table" in page


def test_html_for_tn18_is_under_a_megabyte(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "tn18.html"
    result = invoke(TN18[0], "--shapes", TN18[1], "--device", "none", "--strategy", ALL,
                    "--plot", str(out))
    assert result.exit_code == 0, result.stderr
    assert 10_000 < out.stat().st_size < 1_000_000


def test_batch_gives_a_section_or_a_file_per_case(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    cases = tmp_path / "cases.toml"
    cases.write_text('[[cases]]\nname = "mm"\nequation = "ij,jk->ik"\nsizes = "i=4,j=5,k=6"\n'
                     '[[cases]]\nname = "chain"\nequation = "ab,bc,cd->ad"\n'
                     'sizes = "a=3,b=4,c=5,d=6"\n')
    result = invoke("--cases", str(cases), "--device", "none", "--plot",
                    str(tmp_path / "b.html"), "--json", str(tmp_path / "b.json"))
    assert result.exit_code == 0, result.stderr
    page = (tmp_path / "b.html").read_text()
    assert page.count("<section>") == 2 and "chain" in page
    assert embedded_json(page) == json.loads((tmp_path / "b.json").read_text())
    result = invoke("plot", str(tmp_path / "b.json"), "-o", str(tmp_path / "p.png"))
    assert result.exit_code == 0, result.stderr
    assert sorted(p.name for p in tmp_path.glob("p-*.png")) == ["p-chain.png", "p-mm.png"]


def test_without_matplotlib_plot_exits_2_with_one_line(monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: Path) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "matplotlib" else real(name, *a))
    real_import = builtins.__import__

    def no_matplotlib(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.split(".")[0] == "matplotlib":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    for args in ([*SMALL, "--plot", str(tmp_path / "x.png")],
                 ["plot", str(tmp_path / "missing.json"), "-o", str(tmp_path / "x.png")]):
        result = invoke(*args)
        assert result.exit_code == 2
        assert result.stdout == ""
        assert result.stderr.strip().splitlines() == [
            'Error: plotting needs matplotlib: pip install "einsum-analyze[plot]"']
    assert not (tmp_path / "x.png").exists()


def test_bad_extension_and_bad_report_exit_2(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    result = invoke(*SMALL, "--plot", str(tmp_path / "x.gif"))
    assert result.exit_code == 2 and "give a path ending in .png" in result.stderr
    (tmp_path / "not.json").write_text('{"a": 1}')
    result = invoke("plot", str(tmp_path / "not.json"), "-o", str(tmp_path / "x.png"))
    assert result.exit_code == 2 and "is not an einsum-analyze report" in result.stderr
    result = invoke("plot", str(tmp_path / "none.json"), "-o", str(tmp_path / "x.png"))
    assert result.exit_code == 2 and "cannot read" in result.stderr


def test_analysis_without_plot_imports_no_plotting_code() -> None:
    code = (
        "import sys\n"
        "from einsum_analyze.cli import main\n"
        "sys.argv = ['einsum-analyze', 'ij,jk->ik', '--sizes', 'i=4,j=5,k=6', '--device',"
        " 'none', '--json', '-']\n"
        "try:\n"
        "    main()\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith(('matplotlib',"
        " 'einsum_analyze.plots'))), file=sys.stderr)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=False)
    assert result.stderr.strip().splitlines()[-1] == "[]", result.stderr


def test_a_100_tensor_network_draws(tmp_path: Path) -> None:
    # Its time is bench_plots.py's target, not this test's.
    pytest.importorskip("matplotlib")
    from opt_einsum.testing import rand_equation

    from einsum_analyze.plots import write_plot

    write_plot(analyze("ab,bc->ac", [(2, 3), (3, 4)]).to_dict(), str(tmp_path / "w.png"))
    eq, shapes = rand_equation(100, 3, d_min=2, d_max=8, seed=0)  # the scaling list's
    report = analyze(eq, shapes, optimize="greedy", strategies=tuple(ALL.split(",")))
    document = report.to_dict()
    write_plot(document, str(tmp_path / "big.png"))
    assert (tmp_path / "big.png").read_bytes().startswith(PNG_MAGIC)


def test_the_ci_example_uploads_the_html_report() -> None:
    workflow = (Path(__file__).resolve().parents[2] / "examples" / "ci"
                / "einsum-budgets.yml").read_text()
    assert '--plot "$HTML"' in workflow and "HTML: einsum-report.html" in workflow
    assert "path: ${{ env.HTML }}" in workflow
