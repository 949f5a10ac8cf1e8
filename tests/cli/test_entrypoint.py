"""Subprocess smoke tests of the entry points, and of what the core imports."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from einsum_analyze import __version__


def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=timeout)


def test_module_help():
    result = run(sys.executable, "-m", "einsum_analyze", "--help")
    assert result.returncode == 0, result.stderr
    assert "EQUATION" in result.stdout
    assert "--shapes" in result.stdout


def test_module_version():
    result = run(sys.executable, "-m", "einsum_analyze", "--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"einsum-analyze, version {__version__}"


def test_module_error_exit_code():
    result = run(sys.executable, "-m", "einsum_analyze", "ab,b1->a", "--shapes", "2x3,3x4",
                 "--device", "none")
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith("Error: unknown character '1'")
    assert result.stderr.count("\n") == 1


def test_module_json():
    result = run(sys.executable, "-m", "einsum_analyze", "ab,bc->ac", "--shapes", "2x3,3x4",
                 "--device", "none", "--json", "-")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["forward"]["flops"] == 48


@pytest.mark.skipif(shutil.which("einsum-analyze") is None,
                    reason="the einsum-analyze script is not on PATH")
def test_installed_script():
    script = shutil.which("einsum-analyze")
    assert script is not None
    result = run(script, "--version")
    assert result.returncode == 0, result.stderr
    assert __version__ in result.stdout
    result = run(script, "--help")
    assert result.returncode == 0
    assert "EQUATION" in result.stdout


def test_core_imports_no_torch_click_or_rich():
    code = (
        "import json, sys\n"
        "import einsum_analyze\n"
        "r = einsum_analyze.analyze('bc,bd,cm,mdn->bn', [(512, 2), (512, 2), (2, 7), (7, 2, 7)])\n"
        "json.dumps(r.to_dict())\n"
        "r = einsum_analyze.analyze('...ij,...jk', [(8, 1, 3, 4), (1, 4, 4, 2)], dtype='float64')\n"
        "json.dumps(r.to_dict())\n"
        "print(json.dumps(sorted(m for m in ('torch', 'click', 'rich') if m in sys.modules)))\n"
    )
    result = run(sys.executable, "-c", code)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == []


def test_cli_analysis_only_does_not_import_torch():
    code = (
        "import sys\n"
        "from einsum_analyze.cli import main\n"
        "sys.argv = ['einsum-analyze', 'bc,bd,cm,mdn->bn', '--shapes', '512x2,512x2,2x7,7x2x7',"
        " '--device', 'none']\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as exit:\n"
        "    assert exit.code in (0, None), exit.code\n"
        "print('torch' in sys.modules, file=sys.stderr)\n"
    )
    result = run(sys.executable, "-c", code)
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip().splitlines()[-1] == "False"
    assert "Forward summary" in result.stdout
