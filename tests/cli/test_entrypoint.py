"""Subprocess smoke tests of the entry points, and of what the core imports."""

from __future__ import annotations

import importlib.metadata
import json
import shutil
import subprocess
import sys
import sysconfig

import pytest

from einsum_analyze import __version__
from einsum_analyze.cli import main


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
    result = run(sys.executable, "-m", "einsum_analyze", "ab,b#->a", "--shapes", "2x3,3x4",
                 "--device", "none")
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith("Error: unknown character '#'")
    assert result.stderr.count("\n") == 1


def test_module_json():
    result = run(sys.executable, "-m", "einsum_analyze", "ab,bc->ac", "--shapes", "2x3,3x4",
                 "--device", "none", "--json", "-")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["forward"]["flops"] == 48


def installed_script() -> str:
    """The console script pip made for this package, beside the running interpreter.

    Skips only when the package is not installed as a distribution (a bare source tree on
    sys.path); once it is installed, a missing or wrong script is a failure.
    """
    try:
        dist = importlib.metadata.distribution("einsum-analyze")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("einsum-analyze is not installed (pip install -e . makes its script)")
    (entry,) = [ep for ep in dist.entry_points
                if ep.group == "console_scripts" and ep.name == "einsum-analyze"]
    assert entry.value == "einsum_analyze.cli:main"
    assert entry.load() is main
    script = shutil.which("einsum-analyze", path=sysconfig.get_path("scripts"))
    assert script is not None, f"no einsum-analyze script in {sysconfig.get_path('scripts')}"
    return script


def test_installed_script():
    script = installed_script()
    result = run(script, "--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"einsum-analyze, version {__version__}"
    result = run(script, "--help")
    assert result.returncode == 0, result.stderr
    assert "EQUATION" in result.stdout
    assert "--shapes" in result.stdout
    result = run(script, "ab,bc->ac", "--shapes", "2x3,3x4", "--device", "none", "--json", "-")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["forward"]["flops"] == 48
    result = run(script, "ab,b#->a", "--shapes", "2x3,3x4", "--device", "none")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith("Error: unknown character '#'")


def test_core_imports_no_torch_click_rich_or_matplotlib():
    code = (
        "import json, sys\n"
        "import einsum_analyze\n"
        "r = einsum_analyze.analyze('bc,bd,cm,mdn->bn', [(512, 2), (512, 2), (2, 7), (7, 2, 7)])\n"
        "json.dumps(r.to_dict())\n"
        "r = einsum_analyze.analyze('...ij,...jk', [(8, 1, 3, 4), (1, 4, 4, 2)], dtype='float64')\n"
        "json.dumps(r.to_dict())\n"
        "print(json.dumps(sorted(m for m in ('torch', 'click', 'rich', 'matplotlib')\n"
        "                        if m in sys.modules)))\n"
    )
    result = run(sys.executable, "-c", code)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == []


def _cli_in_process(*args: str) -> str:
    """Python source that runs the command line in-process on ``args`` (exit 0 asserted)."""
    return (
        "import sys\n"
        "from einsum_analyze.cli import main\n"
        f"sys.argv = ['einsum-analyze', *{list(args)!r}]\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as exit:\n"
        "    assert exit.code in (0, None), exit.code\n"
    )


_ANALYSIS_ONLY = ("bc,bd,cm,mdn->bn", "--shapes", "512x2,512x2,2x7,7x2x7", "--device", "none")


def test_cli_analysis_only_does_not_import_torch():
    code = (
        _cli_in_process(*_ANALYSIS_ONLY)
        + "print('torch' in sys.modules, file=sys.stderr)\n"
    )
    result = run(sys.executable, "-c", code)
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip().splitlines()[-1] == "False"
    assert "Forward summary" in result.stdout


def test_analysis_only_cli_imports_no_numpy_and_numpy_works_after():
    # The command imports opt_einsum with numpy held back (cli.base.import_planner); the
    # report is the same, and numpy and opt_einsum's numpy backend work afterwards.
    code = _cli_in_process(*_ANALYSIS_ONLY, "--json", "-") + (
        "loaded = 'numpy' in sys.modules\n"
        "import numpy, opt_einsum\n"
        "a, b = numpy.arange(6.0).reshape(2, 3), numpy.arange(12.0).reshape(3, 4)\n"
        "same = bool((opt_einsum.contract('ij,jk->ik', a, b) == a @ b).all())\n"
        "print(loaded, same, file=sys.stderr)\n")
    result = run(sys.executable, "-c", code)
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip().splitlines()[-1] == "False True"
    api = run(sys.executable, "-c", "import json, einsum_analyze; print(json.dumps("
              "einsum_analyze.analyze('bc,bd,cm,mdn->bn', "
              "[(512, 2), (512, 2), (2, 7), (7, 2, 7)]).to_dict()['forward']))")
    assert api.returncode == 0, api.stderr
    assert json.loads(result.stdout)["forward"] == json.loads(api.stdout)


def test_opt_einsums_object_backend_works_after_import_planner():
    # opt_einsum's object backend takes numpy's tensordot and transpose from the table
    # numpy's import fills; held back, they must still be found when first asked.
    code = (
        "from einsum_analyze.cli.base import import_planner\n"
        "import_planner()\n"
        "import numpy, opt_einsum\n"
        "a = numpy.arange(6).reshape(2, 3).astype(object)\n"
        "b = numpy.arange(12).reshape(3, 4).astype(object)\n"
        "got = opt_einsum.contract('ij,jk->ik', a, b, backend='object')\n"
        "print(bool((got == a.dot(b)).all()))\n"
    )
    result = run(sys.executable, "-c", code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True"


def test_import_planner_leaves_an_opt_einsum_that_needs_numpy_to_import_later(tmp_path):
    # opt_einsum 3.3 imports numpy unconditionally: held back, its import fails, and what it
    # left half-imported is dropped, so that a later import (with numpy) succeeds.
    package = tmp_path / "opt_einsum"
    package.mkdir()
    (package / "__init__.py").write_text("from . import helpers\n")
    (package / "helpers.py").write_text("import numpy\nVERSION = numpy.__version__\n")
    code = (
        f"import sys; sys.path.insert(0, {str(tmp_path)!r})\n"
        "from einsum_analyze.cli.base import import_planner\n"
        "import_planner()\n"
        "left = sorted(m for m in sys.modules if m.split('.')[0] in ('opt_einsum', 'numpy'))\n"
        "import opt_einsum\n"
        "print(left, opt_einsum.__file__.startswith(sys.path[0]),"
        " opt_einsum.helpers.VERSION == sys.modules['numpy'].__version__)\n"
    )
    result = run(sys.executable, "-c", code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[] True True"


def test_analysis_only_cli_loads_no_executor_and_the_api_still_has_them():
    # execute() and capture() load when first used: the analysis-only command line starts
    # without the executors, the runs and the drop-in's modules.
    lazy = ("einsum_analyze.execution", "einsum_analyze.backends.runners",
            "einsum_analyze.training.capture")
    code = _cli_in_process(*_ANALYSIS_ONLY, "--json", "-") + (
        f"loaded = [m for m in {lazy!r} if m in sys.modules]\n"
        "from einsum_analyze import capture, execute\n"
        "from einsum_analyze.execution import execute as direct\n"
        "print(loaded, execute is direct, callable(capture), file=sys.stderr)\n")
    result = run(sys.executable, "-c", code)
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip().splitlines()[-1] == "[] True True"
    assert json.loads(result.stdout)["forward"]["flops"] > 0
