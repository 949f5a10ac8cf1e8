"""The package stays lint-clean (ruff) and type-clean (mypy --strict, pyproject.toml)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]


@pytest.mark.parametrize(
    ("tool", "args"),
    [("ruff", ["check", "einsum_analyze"]),
     pytest.param("mypy", ["einsum_analyze"], marks=pytest.mark.slow)],
)
def test_static_check(tool: str, args: list[str]) -> None:
    if importlib.util.find_spec(tool) is None:
        pytest.skip(f"{tool} is not installed (pip install -e '.[test]' installs it)")
    result = subprocess.run(
        [sys.executable, "-m", tool, *args], cwd=ROOT, capture_output=True, text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
