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
