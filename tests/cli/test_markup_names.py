"""Names the user writes (a case's, a profile's) are printed as text, never as rich markup."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from einsum_analyze.cli import cli


def test_a_case_named_like_markup_is_printed_as_is(tmp_path: Path) -> None:
    cases = tmp_path / "cases.toml"
    cases.write_text('[[cases]]\nname = "[/x] case"\nequation = "ij,jk->ik"\n'
                     'shapes = "2x3,3x4"\n', encoding="utf-8")
    result = CliRunner(env={"COLUMNS": "120"}).invoke(
        cli, ["--cases", str(cases), "--device", "none"], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    assert "[/x] case" in result.stdout
