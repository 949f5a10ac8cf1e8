"""docs/cli.md lists every option of both verbs with an example, -h and -V included, and
documents shell completion."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from einsum_analyze.cli import cli, compare_cli

PAGE = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text(encoding="utf-8")
OPTIONS = sorted({opt for command in (cli, compare_cli) for param in command.params
                  for opt in param.opts if opt.startswith("-")} | {"-h", "--help"})


@pytest.mark.parametrize("option", OPTIONS)
def test_every_option_is_listed_with_an_example(option):
    assert f"`{option}" in PAGE, f"{option} is not listed"
    example = rf"(einsum-analyze[^\n`]*\s|`){re.escape(option)}(\s[^`\n]*)?`?"
    assert re.search(example, PAGE), f"{option} has no example"


def test_version_and_help_and_completion_are_documented():
    assert "einsum-analyze -V" in PAGE and "einsum-analyze -h" in PAGE
    assert "_EINSUM_ANALYZE_COMPLETE=bash_source" in PAGE
    assert "`auto`" in PAGE  # the default device
