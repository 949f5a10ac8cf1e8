"""The HTML report in a real browser: headless Chromium (Debian's package), skipped where absent."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from einsum_analyze.cli import cli

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None,
                                reason="needs chromium (apt-get install chromium)")


def render(page: Path, screenshot: Path) -> list[str]:
    """Open ``page`` headless with every host unresolvable; the console lines it logged."""
    assert CHROMIUM is not None
    result = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
         "--v=0", '--host-resolver-rules=MAP * ~NOTFOUND', f"--screenshot={screenshot}",
         "--window-size=1200,2400", page.as_uri()],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert screenshot.exists(), result.stderr[-2000:]
    return [line for line in result.stderr.splitlines() if ":CONSOLE" in line]


def test_the_console_check_sees_errors(tmp_path: Path) -> None:
    page = tmp_path / "bad.html"
    page.write_text('<!DOCTYPE html><html><body><img src="https://example.invalid/x.png">'
                    "<script>undefined_function();</script></body></html>")
    lines = render(page, tmp_path / "bad.png")
    assert any("undefined_function" in line for line in lines), lines


def test_html_report_renders_without_console_errors(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    page = tmp_path / "report.html"
    result = CliRunner().invoke(cli, [
        "ab,bc,cd->ad", "--sizes", "a=8,b=6,c=5,d=4", "--device", "none",
        "--strategy", "reverse,independent,torch-autograd,checkpoint", "--plot", str(page),
    ], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    shot = tmp_path / "report.png"
    assert render(page, shot) == []
    data = shot.read_bytes()
    assert data.startswith(b"\x89PNG") and len(data) > 20_000  # a page, not a blank


CASES = """
[[cases]]
name = "gemm"
equation = "ij,jk->ik"
shapes = "8x6,6x4"

[[cases]]
name = "tight"
equation = "ij,jk,kl->il"
shapes = "8x6,6x5,5x4"
budgets = { max_peak = "100B", max_flops = 1e9 }

[[cases]]
name = "chain"
equation = "ab,bc->ac"
shapes = "3x3,3x3"

[[cases]]
name = "typo"
equation = "ab,bc->ac"
shape = "3x3,3x3"
"""


def dump_dom(page: Path) -> str:
    """The page as the browser built it, with every host unresolvable."""
    assert CHROMIUM is not None
    result = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
         "--host-resolver-rules=MAP * ~NOTFOUND", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert result.returncode == 0 and "<body" in result.stdout, result.stderr[-2000:]
    return result.stdout


def test_the_ci_html_report_shows_every_case_failed_first_with_budgets(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    import re

    cases = tmp_path / "cases.toml"
    cases.write_text(CASES)
    page = tmp_path / "cases.html"
    result = CliRunner().invoke(cli, ["--cases", str(cases), "--device", "none",
                                      "--plot", str(page)], catch_exceptions=False)
    assert result.exit_code == 2  # the bad case outranks the exceeded budget
    assert render(page, tmp_path / "cases.png") == []  # renders, no console error
    dom = dump_dom(page)
    assert "<h1>einsum-analyze: 4 cases: 1 error, 1 budget exceeded, 2 ok</h1>" in dom
    headings = re.findall(r'<h2 id="case-([^"]+)"', dom)
    assert headings == ["typo", "tight", "gemm", "chain"]  # every case, failed first
    typo = dom[dom.index('id="case-typo"'):dom.index('id="case-tight"')]
    assert "Error: case 'typo' has unknown key 'shape'" in typo
    tight = dom[dom.index('id="case-tight"'):dom.index('id="case-gemm"')]
    rows = re.findall(r"<tr><td>(max-[a-z]+)</td><td>([^<]*)</td><td>([^<]*)</td>"
                      r"<td>([^<]*)</td><td[^>]*>([^<]*)</td></tr>", tight)
    assert rows == [("max-flops", "forward", "624", "1.00e9", "pass"),
                    ("max-peak", "strategy reverse", "1.11 KiB", "100 B", "EXCEEDED")]
    # Nothing the page holds points outside it: a src, href or url(...) names only an
    # element of the page itself (an SVG clip path: url(#p964...)).
    assert all(ref.startswith("#")
               for ref in re.findall(r"""(?:src|href)\s*=\s*["']([^"']*)""", dom))
    assert all(ref.startswith("#") for ref in re.findall(r"""url\(\s*["']?([^)"']*)""", dom))
